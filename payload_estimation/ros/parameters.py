"""Node parameters declared from one table per node: descriptors, validation, run-time changes, docs.

A node lists its parameters once as :class:`Param` rows in a :class:`ParameterTable`. The table

- declares every parameter with a ``ParameterDescriptor`` (type from the default, description with
  units, range, ``read_only`` for what is fixed at start-up), so ``ros2 param describe`` tells the
  truth;
- checks start-up values (parameter files, ``-p``) and refuses a bad one with one line naming the
  parameter, the value and what is allowed (:class:`ParameterError`);
- refuses out-of-range and unsafe values of ``ros2 param set`` with that same reason (a
  set-parameters callback), and tells the node which accepted values changed, so it can apply them
  at its next safe point;
- renders the Markdown table in docs/ros_interface.md (tested to match, so there is one copy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.parameter import Parameter

from ..reporting import format_table


class ParameterError(ValueError):
    """A parameter value that is not allowed; the message names the parameter and the allowed values."""


@dataclass(frozen=True)
class Param:
    """One parameter.

    ``default`` fixes the type (bool, int, float, str or a list of one of them); ``low``/``high``
    bound numbers (every element of a list), inclusive unless ``low_open``/``high_open``;
    ``choices`` lists the allowed strings; ``read_only`` parameters are fixed at start-up;
    ``applies`` says when a run-time change takes effect (docs); ``min_items`` for lists.
    """

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    read_only: bool = False
    applies: str = "immediately"
    min_items: int = 0
    allow_empty_string: bool = True

    def allowed(self) -> str:
        """The allowed values in words, e.g. ``(0, 10]`` or ``one of: a, b``."""
        parts = []
        if self.choices:
            parts.append("one of: " + ", ".join(self.choices))
        if self.low is not None or self.high is not None:
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            parts.append(f"{'(' if self.low_open or self.low is None else '['}{lo}, {hi}"
                         f"{')' if self.high_open or self.high is None else ']'}"
                         + (" each" if isinstance(self.default, list) else ""))
        if self.min_items:
            parts.append(f"at least {self.min_items} value(s)")
        return "; ".join(parts)

    def check(self, value: Any) -> str | None:
        """None if ``value`` is allowed, else the reason."""
        is_list = not isinstance(value, (str, bytes)) and hasattr(value, "__len__")  # list, array.array, ...
        values = list(value) if is_list else [value]
        if isinstance(self.default, list) and len(values) < self.min_items:
            return f"{self.name}: needs at least {self.min_items} value(s), got {len(values)}"
        for v in values:
            if isinstance(v, str):
                if self.choices and v not in self.choices:
                    return f"{self.name}: {v!r} is not allowed; allowed: {', '.join(self.choices)}"
                if not v and not self.allow_empty_string:
                    return f"{self.name}: must not be empty"
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            x = float(v)
            bad = not math.isfinite(x)
            if self.low is not None:
                bad |= x <= self.low if self.low_open else x < self.low
            if self.high is not None:
                bad |= x >= self.high if self.high_open else x > self.high
            if bad:
                return f"{self.name}: {value!r} is out of range; allowed: {self.allowed()}"
        return None

    def descriptor(self) -> ParameterDescriptor:
        d = ParameterDescriptor(name=self.name, description=self.description, read_only=self.read_only,
                                additional_constraints=self.allowed())
        both = self.low is not None and self.high is not None
        if both and isinstance(self.default, bool):
            pass
        elif both and isinstance(self.default, int):
            d.integer_range = [IntegerRange(from_value=int(math.ceil(self.low)), to_value=int(self.high), step=0)]
        elif both and isinstance(self.default, float):
            d.floating_point_range = [FloatingPointRange(from_value=float(self.low), to_value=float(self.high),
                                                         step=0.0)]
        return d

    def doc_default(self) -> str:
        v = self.default
        if isinstance(v, list):
            return "[" + ", ".join(repr(x) if isinstance(x, str) else f"{x:g}" for x in v) + "]"
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, float):
            return f"{v:g}"
        return repr(v) if isinstance(v, str) else str(v)


@dataclass
class ParameterTable:
    """A node's parameters (see the module docstring)."""

    params: Sequence[Param]
    by_name: dict[str, Param] = field(init=False)

    def __post_init__(self):
        self.params = tuple(self.params)
        self.by_name = {p.name: p for p in self.params}
        if len(self.by_name) != len(self.params):
            raise ValueError("parameter table lists a name twice")

    def __add__(self, other: ParameterTable) -> ParameterTable:
        return ParameterTable([*self.params, *other.params])

    def declare(self, node, check: Callable[[dict[str, Any]], str | None] | None = None,
                on_change: Callable[[set[str]], None] | None = None) -> dict[str, Any]:
        """Declare every parameter on ``node`` and return the start-up values by name.

        ``check(values)`` judges a whole set of values (cross-parameter rules, e.g. one threshold
        per joint) at start-up and on every change; ``on_change(names)`` is called after accepted
        changes. Raises :class:`ParameterError` for a start-up value that is not allowed.
        """
        for p in self.params:
            try:
                node.declare_parameter(p.name, p.default, p.descriptor())
            except Exception as e:  # rclpy's own type/range exceptions: re-word them for the operator
                raise ParameterError(f"parameter {p.name}: {e} (expected {type(p.default).__name__}"
                                     f"{', ' + p.allowed() if p.allowed() else ''})") from e
        values = self.values(node)
        for p in self.params:
            err = p.check(values[p.name])
            if err:
                raise ParameterError(err)
        err = check(values) if check else None
        if err:
            raise ParameterError(err)

        def on_set(changes: list[Parameter]) -> SetParametersResult:
            new = dict(self.values(node))
            for c in changes:
                spec = self.by_name.get(c.name)
                if spec is None:
                    continue
                err = spec.check(c.value)
                if err:
                    return SetParametersResult(successful=False, reason=err)
                new[c.name] = c.value
            err = check(new) if check else None
            return SetParametersResult(successful=err is None, reason=err or "")

        node.add_on_set_parameters_callback(on_set)
        if on_change is not None:
            node.add_post_set_parameters_callback(lambda changes: on_change({c.name for c in changes}))
        return values

    def values(self, node, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Current values by name (lists as Python lists)."""
        out = {}
        for name in names or self.by_name:
            v = node.get_parameter(name).value
            out[name] = list(v) if isinstance(v, (list, tuple)) or hasattr(v, "tolist") else v
        return out

    def markdown(self) -> str:
        """The parameter table of docs/ros_interface.md."""
        rows = [(f"`{p.name}`", f"`{p.doc_default()}`", p.allowed() or "—", p.description,
                 "at start-up (read-only)" if p.read_only else p.applies) for p in self.params]
        return format_table(("parameter", "default", "allowed", "description", "takes effect"), rows, pad=False)


PARAMS_HEADER = """\
# payload_estimation parameters: every node's parameter with its default (ROS 2 parameter file).
# Generated from the nodes' parameter tables by tools/gen_ros_docs.py: edit the tables, not this file.
# Every key is under /** (all nodes, any namespace) and names are unique across the nodes, so a later
# parameter file, a launch argument or a -p override outranks these values.
# Units: SI (rad, m, kg, N m, s); keys ending in _deg are degrees.
"""


def render_params_file(tables: dict[str, ParameterTable]) -> str:
    """The package's parameter file: every parameter of ``tables`` (node name -> table) once."""
    lines = [PARAMS_HEADER.rstrip("\n"), "/**:", "  ros__parameters:"]
    seen: set[str] = set()
    for node, table in tables.items():
        new = [p for p in table.params if p.name not in seen]
        if not new:
            continue
        lines.append(f"    # --- {node}" + (" (and the nodes before it)" if seen else ""))
        for p in new:
            seen.add(p.name)
            value = yaml_value(p.default)
            lines.append(f"    {p.name}: {value}  # {p.description}" + (f" [{p.allowed()}]" if p.allowed() else ""))
    return "\n".join(lines) + "\n"


def yaml_value(v: Any) -> str:
    """A parameter value as YAML flow text (floats keep a decimal point, so they stay doubles)."""
    if isinstance(v, list):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, str):
        return '""' if not v else (f'"{v}"' if any(c in v for c in ":#[]{},") else v)
    return str(v)


def render_docs(text: str, tables: dict[str, ParameterTable]) -> str:
    """``text`` with each ``<!-- parameters: NODE -->`` ... ``<!-- /parameters -->`` block replaced by
    that node's :meth:`ParameterTable.markdown` (raises KeyError for an unknown node)."""
    out, pos = [], 0
    start_tag, end_tag = "<!-- parameters: ", "<!-- /parameters -->"
    while (i := text.find(start_tag, pos)) >= 0:
        j = text.index("-->", i)
        node = text[i + len(start_tag):j].strip()
        k = text.index(end_tag, j)
        out.append(text[pos:j + 3] + "\n" + tables[node].markdown() + "\n")
        pos = k
    out.append(text[pos:])
    return "".join(out)


__all__ = ["Param", "ParameterTable", "ParameterError", "render_params_file", "render_docs", "yaml_value"]
