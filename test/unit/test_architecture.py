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
