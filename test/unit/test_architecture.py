"""The import rules of docs/architecture.md hold for every module of the package.

The allowed edges are read from the table in docs/architecture.md (one copy of the rules); every
import statement of every module, including imports inside functions, is checked against it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "payload_estimation"
ROS_PACKAGES = re.compile(r"^(rclpy|rcl_interfaces|builtin_interfaces|std_srvs|rosgraph_msgs|lifecycle_msgs|"
                          r"action_msgs|[a-z_]+_msgs)$")


def rules() -> dict[str, set[str]]:
    """folder -> the project's folders it may import, from docs/architecture.md's table."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("| folder | may import |", 1)[1].split("\n\n", 1)[0]
    out = {}
    for line in table.strip().splitlines()[1:]:
        folder, allowed = (c.strip() for c in line.strip().strip("|").split("|"))
        out[folder] = set() if allowed == "—" else {a.strip() for a in allowed.split(",")}
    return out


def layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imports(path: Path, package: Path = PACKAGE) -> list[tuple[int, str, str]]:
    """(line, project layer or '', external top-level package or '') of every import in ``path``, a
    module of the package at ``package``."""
    rel = path.relative_to(package)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "payload_estimation":
                    found.append((node.lineno, parts[1] if len(parts) > 1 else "", ""))
                else:
                    found.append((node.lineno, "", parts[0]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel.parts[:-1])[: len(rel.parts) - node.level]
                mod = base + (node.module.split(".") if node.module else [])
                target = mod[0] if mod else node.names[0].name
                found.append((node.lineno, target, ""))
            elif node.module.split(".")[0] == "payload_estimation":
                parts = node.module.split(".")
                found.append((node.lineno, parts[1] if len(parts) > 1 else node.names[0].name, ""))
            else:
                found.append((node.lineno, "", node.module.split(".")[0]))
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if layer_of(p) != "__init__")


def test_every_folder_has_a_rule():
    table = rules()
    layers = {layer_of(p) for p in MODULES}
    assert layers <= set(table), f"folders without a rule in docs/architecture.md: {sorted(layers - set(table))}"
    assert set().union(*table.values()) <= set(table), "a rule names a folder that has no rule itself"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_rules(path):
    layer = layer_of(path)
    allowed = rules()[layer] | {layer}
    bad = [f"line {line}: {target}" for line, target, _ in imports(path) if target and target not in allowed]
    assert not bad, f"{path.relative_to(ROOT)} ({layer}) may import only {sorted(allowed)}; it imports {bad}"
    if layer != "ros":
        ros = [f"line {line}: {ext}" for line, _, ext in imports(path) if ext and ROS_PACKAGES.match(ext)]
        assert not ros, f"{path.relative_to(ROOT)} imports ROS packages outside ros/: {ros}"


def test_the_checker_sees_a_violation(tmp_path):
    """The parser finds relative, absolute and function-local imports (so the rule test can fail)."""
    bad = tmp_path / "payload_estimation" / "collision" / "probe.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("def f():\n    from ..identification import estimate\n    import rclpy\n"
                   "from payload_estimation.ros import qos\n")
    got = imports(bad, tmp_path / "payload_estimation")
    assert [(t, e) for _, t, e in got] == [("ros", ""), ("identification", ""), ("", "rclpy")]


def test_tests_find_external_data_in_one_place():
    """Only test/data_paths.py builds paths into ../shared (a lone clone must run its tests: one skip-or-fail
    rule); a string literal "shared" or "shared/..." elsewhere in the tests is such a path."""
    name = "sha" + "red"  # not a literal of its own

    def builds_shared_path(path: Path) -> bool:
        return any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                   and (n.value == name or n.value.startswith(name + "/"))
                   for n in ast.walk(ast.parse(path.read_text())))

    offenders = [p.name for p in (ROOT / "test").rglob("*.py") if p.name != "data_paths.py" and builds_shared_path(p)]
    assert not offenders, f"these tests look for ../shared themselves (use test/data_paths.py): {offenders}"


# ------------------------------------------------------------------ import circles
KNOWN_CIRCLES = {
    frozenset({"cli.demo", "cli.demo_online"}):
        "demo imports demo_online inside run() for --online; demo_online takes demo's helpers (_say, MONITOR, ...): "
        "move those to a module both import",
}
"""Circles through imports inside functions that remain, each with why; none may be added (issue 49)."""


def _module(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_imports(path: Path, known: set[str], package: Path = PACKAGE, top_level: bool = False) -> set[str]:
    """The package's modules (dotted, relative to the package) that ``path`` imports: at its top level only, or
    anywhere (inside functions too); never inside ``if TYPE_CHECKING:`` (no import at run time)."""
    me = _module(path, package)
    pkg = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    found = set()

    def visit(nodes):
        for node in nodes:
            if _type_checking(node):
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(pkg[: len(pkg) - (node.level - 1)] + ([node.module] if node.module else []))
                elif node.module.split(".")[0] == "payload_estimation":
                    base = node.module.partition(".")[2]
                else:
                    continue
                for a in node.names:  # `from . import x` imports the module x; `from .m import f` the module m
                    sub = f"{base}.{a.name}" if base else a.name
                    found.add(sub if sub in known else base)
            elif isinstance(node, ast.Import):
                found.update(a.name.partition(".")[2] for a in node.names if a.name.startswith("payload_estimation."))
            if not top_level or isinstance(node, (ast.If, ast.Try)):
                visit(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text()).body)
    return (found & known) - {me}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected parts of more than one module of ``graph`` (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while not part or part[-1] != v:
                part.append(stack.pop())
            if len(part) > 1:
                out.append(frozenset(part))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def import_graph(package: Path = PACKAGE, top_level: bool = False) -> dict[str, set[str]]:
    paths = sorted(package.rglob("*.py"))
    known = {_module(p, package) for p in paths}
    return {_module(p, package): module_imports(p, known, package, top_level) for p in paths}


def test_no_module_imports_itself_around_a_circle():
    """At the top level no circle at all (an import order that works only by luck); through imports inside
    functions only the known ones, each with its reason."""
    top = circles(import_graph(top_level=True))
    assert not top, f"import circles at the top level: {[sorted(c) for c in top]}"
    anywhere = circles(import_graph())
    new = [sorted(c) for c in anywhere if c not in KNOWN_CIRCLES]
    assert not new, f"import circles (imports inside functions count, TYPE_CHECKING ones do not): {new}"


def test_the_circle_finder_sees_a_circle_through_a_function_and_ignores_type_checking(tmp_path):
    pkg = tmp_path / "payload_estimation"
    (pkg / "ros").mkdir(parents=True)
    (pkg / "ros" / "a.py").write_text("from .b import x\n")
    (pkg / "ros" / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "ros" / "c.py").write_text("from payload_estimation.ros.a import y\n")
    (pkg / "ros" / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    (pkg / "ros" / "e.py").write_text("from .d import z\n")
    assert circles(import_graph(pkg)) == [frozenset({"ros.a", "ros.b", "ros.c"})]
    assert circles(import_graph(pkg, top_level=True)) == []


RCLPY_INTERNALS = {  # what ros/rclpy_compat.py wraps, as it reads in code
    "rclpy's C extension": r"implementation_singleton|rclpy_implementation|\bWaitSet\b|destroy_when_not_in_use",
    "a C subscription's take": r"(?<!rclpy_compat)\.take_message\(",
    "the start-up parameter values": r"\b_parameter_overrides\b",
    "the time source's /clock subscription": r"\b_time_source\b|\b_clock_sub\b",
    "a replaced service callback": r"\.callback\s*=",
}


def test_rclpy_internals_only_in_the_adapter():
    """rclpy's private names are used in ros/rclpy_compat.py only (one place to fix for a new distro; each checked
    by test_rclpy_compat); every pattern finds its use there, so none of them is a pattern that finds nothing."""
    adapter = PACKAGE / "ros" / "rclpy_compat.py"
    for what, pattern in RCLPY_INTERNALS.items():
        assert re.search(pattern, adapter.read_text()), f"{what}: {pattern} no longer matches rclpy_compat.py"
    found = [f"{p.relative_to(ROOT)}:{i}: {what}" for p in sorted(PACKAGE.rglob("*.py")) if p != adapter
             for i, line in enumerate(p.read_text().splitlines(), 1)
             for what, pattern in RCLPY_INTERNALS.items() if re.search(pattern, line)]
    assert not found, f"rclpy internals outside ros/rclpy_compat.py (add a function there): {found}"
