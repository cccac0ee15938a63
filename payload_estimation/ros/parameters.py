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
- takes whole numbers for double parameters (``ros2 param set ... amplitude_deg 5`` sends an integer,
  ``[6, 6]`` an integer array; a parameter file may say ``5``) and words a wrong type, an unknown
  name or a read-only parameter for a person (rclpy's own reasons, e.g. "Wrong parameter type,
  expected '3' got '2'", never reach the user);
- applies one ``SetParameters`` request whole or not at all (rclpy's parameter service applies its
  parameters one by one, so one good and one bad value applied the good one): the node's
  ``~/set_parameters`` (and ``~/set_parameters_atomically``) handler is replaced by
  :meth:`ParameterTable.apply_request`;
- renders the Markdown table in docs/ros_interface.md (tested to match, so there is one copy).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rcl_interfaces.srv import SetParameters, SetParametersAtomically
from rclpy.exceptions import ParameterNotDeclaredException
from rclpy.parameter import Parameter

from ..errors import PayloadEstimationError
from ..files.output_path import output_problem
from ..reporting import format_table
from . import rclpy_compat
from .parameter_names import NODE_PARAMETERS


class ParameterError(PayloadEstimationError):
    """A parameter value that is not allowed; the message names the parameter and the allowed values."""


@dataclass(frozen=True)
class Param:
    """One parameter.

    ``default`` fixes the type (bool, int, float, str or a list of one of them); ``low``/``high``
    bound numbers (every element of a list), inclusive unless ``low_open``/``high_open``;
    ``choices`` lists the allowed strings; ``read_only`` parameters are fixed at start-up;
    ``applies`` says when a run-time change takes effect (docs); ``min_items`` for lists;
    ``path`` ("dir" or "file"): a non-empty value must be a location this process can write (a
    directory it can create and write into, or a file it can create or overwrite:
    :func:`files.output_path.output_problem`, the command line's rule too), checked when set.
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
    path: str = ""

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
            parts.append("one value or more" if self.min_items == 1 else f"at least {self.min_items} values")
        return "; ".join(parts)

    def check(self, value: Any) -> str | None:
        """None if ``value`` is allowed, else the reason (the value shown as a person writes it)."""
        is_list = _is_list(value)
        values = list(value) if is_list else [value]
        if isinstance(self.default, list) and len(values) < self.min_items:
            return f"{self.name}: needs at least {self.min_items} value(s), got {len(values)}"
        for i, v in enumerate(values):
            if isinstance(v, str):
                if self.choices and v not in self.choices:
                    return f"{self.name}: {v!r} is not allowed; allowed: {', '.join(self.choices)}"
                if not v and not self.allow_empty_string:
                    return f"{self.name}: must not be empty"
                problem = output_problem(v, self.path) if self.path and v else None
                if problem:
                    return f"{self.name} {problem}"
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
                where = f" (item {i + 1} of {show_value(value)})" if is_list and len(values) > 1 else ""
                return f"{self.name}: {show_value(v if is_list else value)}{where} is out of range; allowed: " \
                       f"{self.allowed()}"
        return None

    def coerce(self, value: Any) -> Any:
        """``value`` in this parameter's type where a person's way of writing it is unambiguous: a whole
        number for a double (5 -> 5.0), whole numbers for a double list ([6, 6] -> [6.0, 6.0]), one
        number for a number list (6 -> [6.0]), a whole double for an integer (6.0 -> 6). Else unchanged."""
        d = self.default
        if isinstance(d, list):
            item = d[0] if d else None
            if _is_number(value) and isinstance(item, (int, float)) and not isinstance(item, bool):
                value = [value]
            if _is_list(value) and isinstance(item, (int, float)) and not isinstance(item, bool):
                return [_coerce_number(v, type(item)) for v in value]
            return value
        if isinstance(d, (int, float)) and not isinstance(d, bool) and _is_number(value):
            return _coerce_number(value, type(d))
        return value

    def type_problem(self, value: Any) -> str | None:
        """None if ``value`` (after :meth:`coerce`) has this parameter's type, else the reason in words."""
        want = _type_words(self.default)
        d = self.default
        if isinstance(d, list):
            ok = _is_list(value) and all(_same_type(v, d[0]) for v in value) if d else _is_list(value)
        else:
            ok = _same_type(value, d)
        if ok:
            return None
        return f"{self.name} takes {want}, got {_value_words(value)}"

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


def _is_list(value: Any) -> bool:
    return not isinstance(value, (str, bytes)) and hasattr(value, "__len__")  # list, array.array, ...


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _coerce_number(v: Any, kind: type) -> Any:
    if not _is_number(v):
        return v
    if kind is float:
        return float(v)
    return int(v) if isinstance(v, float) and math.isfinite(v) and v == int(v) else v


def _same_type(v: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(v, bool):
        return isinstance(v, bool) and isinstance(default, bool)
    return type(v) is type(default) or (isinstance(default, float) and isinstance(v, float))


def _type_words(default: Any) -> str:
    """What a parameter takes, in words, with an example."""
    if isinstance(default, list):
        item = default[0] if default else ""
        if isinstance(item, bool):
            return "a list of true/false values, e.g. [true, false]"
        if isinstance(item, int):
            return "a list of whole numbers, e.g. [1, 2]"
        if isinstance(item, float):
            return "a list of numbers, e.g. [6.0, 6.0] (or one number for all)"
        return "a list of texts, e.g. ['a', 'b']"
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "a whole number, e.g. 10"
    if isinstance(default, float):
        return "a number, e.g. 5 or 5.0"
    return "a text (a quoted string)"


def _value_words(v: Any) -> str:
    """A received value with what kind of value it is."""
    if isinstance(v, bool):
        return f"the true/false value {str(v).lower()}"
    if isinstance(v, str):
        return f"the text {v!r}"
    if isinstance(v, float):
        return f"the fractional number {v:g}"
    if isinstance(v, int):
        return f"the whole number {v}"
    if _is_list(v):
        return f"the list {show_value(v)}"
    return "no value" if v is None else repr(v)


def show_value(v: Any) -> str:
    """A parameter value as a person writes it: ``[6, 6.5]``, ``0.5``, ``'text'`` (never ``array('d', ...)``)."""
    if _is_list(v):
        return "[" + ", ".join(show_value(x) for x in v) + "]"
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
        changes. Raises :class:`ParameterError` for a start-up value that is not allowed. Installs
        the conversions and the whole-request handling of the module docstring.
        """
        overrides = rclpy_compat.parameter_overrides(node)  # parameter files and -p
        for p in self.params:
            given = overrides.get(p.name)
            if given is not None and given.type_ != Parameter.Type.NOT_SET:
                value = p.coerce(given.value) if p.type_problem(given.value) else given.value
                err = p.type_problem(value) or p.check(value)  # in our words, before rclpy's range check
                if err:
                    raise ParameterError(f"parameter {err} (from the parameter file or -p)")
                overrides[p.name] = Parameter(p.name, value=value)
            try:
                node.declare_parameter(p.name, p.default, p.descriptor())
            except Exception as e:  # rclpy's own type/range exceptions: re-word them for the operator
                raise ParameterError(f"parameter {p.name}: {e} (expected {_type_words(p.default)}"
                                     f"{', ' + p.allowed() if p.allowed() else ''})") from e
        node.parameters_ignored = self.ignored_overrides(node, overrides)
        if node.parameters_ignored:
            node.get_logger().warning(self.ignored_words(node))
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

        node.add_pre_set_parameters_callback(self.convert)
        node.add_on_set_parameters_callback(on_set)
        if on_change is not None:
            node.add_post_set_parameters_callback(lambda changes: on_change({c.name for c in changes}))
        self._replace_parameter_services(node)
        return values

    def ignored_overrides(self, node, overrides: dict[str, Parameter]) -> list[str]:
        """The start-up values (parameter files, ``-p``) addressed to ``node`` that none of the package's nodes has:
        rclpy drops them without a word, so a typo would leave the default in force. A name another node of the
        package has is not counted (a shared file's ``/**`` section or bringup's ``-p`` reaches every node)."""
        shared = package_parameter_names()
        return sorted(k for k in overrides  # declared by now: this table's and rclpy's own (use_sim_time, ...)
                      if not node.has_parameter(k) and k not in shared and not k.startswith("qos_overrides."))

    def ignored_words(self, node) -> str:
        """The warning for ``node.parameters_ignored``: each name, the nearest parameter, where the list is."""
        names = []
        for k in node.parameters_ignored:
            near = difflib.get_close_matches(k, list(self.by_name), n=1)
            names.append(f"{k!r}" + (f" (did you mean {near[0]}?)" if near else ""))
        return (f"{node.get_name()} has no parameter {', '.join(names)}: the value(s) given in a parameter file or "
                "with -p are ignored and the default stays in force; docs/ros_interface.md lists the parameters")

    def convert(self, changes: list[Parameter]) -> list[Parameter]:
        """Pre-set callback: each value of a table parameter in its declared type where unambiguous
        (:meth:`Param.coerce`); the others unchanged."""
        out = []
        for c in changes:
            spec = self.by_name.get(c.name)
            if spec is not None and c.type_ != Parameter.Type.NOT_SET:
                value = spec.coerce(c.value)
                if spec.type_problem(value) is None:
                    c = Parameter(c.name, value=value)
            out.append(c)
        return out

    def refusal(self, node, param: Parameter) -> str | None:
        """Why ``param`` (after :meth:`convert`) cannot be set on ``node``, in words; None if it can as far as
        this one value goes (the cross-parameter check is judged on the whole request)."""
        if not node.has_parameter(param.name):
            known = list(node.list_parameters([], 0).names)
            near = difflib.get_close_matches(param.name, known, n=1)
            return (f"{node.get_name()} has no parameter {param.name!r}"
                    + (f" (did you mean {near[0]}?)" if near else "")
                    + f"; `ros2 param list {node.get_fully_qualified_name()}` lists them")
        spec = self.by_name.get(param.name)
        if spec is None:
            return None  # e.g. use_sim_time: rclpy's own checks
        if spec.read_only:
            return (f"{param.name} is fixed at start-up (read-only): set it in the parameter file or with "
                    f"-p {param.name}:=... and restart the node")
        if param.type_ == Parameter.Type.NOT_SET:
            return f"{param.name} cannot be unset; give it a value ({_type_words(spec.default)})"
        return spec.type_problem(param.value) or spec.check(param.value)

    def apply_request(self, node, params: list[Parameter]) -> list[SetParametersResult]:
        """Set ``params`` (one SetParameters request) all together or not at all; one result per parameter.

        A refused value gets its reason; the others of the same request get why they were not applied."""
        params = self.convert(params)
        reasons = [self.refusal(node, p) for p in params]
        bad = [p.name for p, r in zip(params, reasons) if r]
        if not bad:
            try:
                res = node.set_parameters_atomically(params)
            except ParameterNotDeclaredException as e:  # a parameter undeclared meanwhile
                res = SetParametersResult(successful=False, reason=f"not applied: {e}")
            if res.successful or len(params) == 1:
                return [SetParametersResult(successful=res.successful, reason=res.reason) for _ in params]
            return [SetParametersResult(successful=False, reason=f"{res.reason} (nothing of this request was "
                                        "applied: a request is applied whole or not at all)") for _ in params]
        others = ", ".join(bad)
        return [SetParametersResult(successful=False, reason=r or (
            f"{p.name} not applied: {others} in the same request {'was' if len(bad) == 1 else 'were'} refused "
            "(a request is applied whole or not at all)")) for p, r in zip(params, reasons)]

    def _replace_parameter_services(self, node) -> None:
        """Serve the node's ``~/set_parameters`` and ``~/set_parameters_atomically`` by :meth:`apply_request`
        (rclpy's parameter service sets a request's parameters one by one and words its refusals for
        programmers). The services themselves stay: only the callback the executor calls is replaced."""
        def results(request) -> list[SetParametersResult]:
            try:
                return self.apply_request(node, [Parameter.from_parameter_msg(m) for m in request.parameters])
            except Exception as e:  # noqa: BLE001 -- a request must never stop the node's executor
                node.get_logger().error(f"parameter request failed: {e!r}")
                return [SetParametersResult(successful=False, reason=f"not applied: {e}") for _ in request.parameters]

        def set_parameters(request, response):
            response.results = results(request)
            return response

        def set_atomically(request, response):
            failed = [r for r in results(request) if not r.successful]
            response.result = failed[0] if failed else SetParametersResult(successful=True)
            return response

        rclpy_compat.replace_service_callback(node, SetParameters, "set_parameters", set_parameters)
        rclpy_compat.replace_service_callback(node, SetParametersAtomically, "set_parameters_atomically",
                                              set_atomically)

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


SIMULATOR_PARAMETERS = NODE_PARAMETERS["sim_node"]
"""sim_node's parameter names (its table is in ros/sim_node.py, which imports MuJoCo: the robot-side nodes must not
need it to read a file shared with the simulator)."""


def package_parameter_names() -> set[str]:
    """Every parameter name of the package's nodes: the estimator, the sampler, the monitor and the simulator, so
    that a file or ``-p`` shared with another node is not a typo to this one (:mod:`.parameter_names`, generated
    from the tables: this module imports none of them)."""
    return set().union(*NODE_PARAMETERS.values())


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
    """A parameter value as one line of YAML flow text (PyYAML: floats keep a decimal point, so they stay
    doubles; strings that would read as another type are quoted)."""
    text = yaml.safe_dump(v, default_flow_style=True, width=math.inf, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...")  # a lone scalar is a document: drop its end marker


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


__all__ = ["Param", "ParameterTable", "ParameterError", "render_params_file", "render_docs", "show_value",
           "yaml_value", "package_parameter_names", "SIMULATOR_PARAMETERS"]
