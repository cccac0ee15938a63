"""Each subpackage's public API (its ``__init__.__all__``) imports, stays cheap to import, and is what the
command line uses.

The API names are imported on first use (``__getattr__`` in each ``__init__``), so a name that points at
the wrong module, or a module that no longer defines it, fails only when someone uses it: this test uses
every one. ``cli/`` modules import a subpackage through its API, never by a deep path, except the
documented cases in ``DEEP_IMPORTS``.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "payload_estimation"
# the folders with a public API in their __init__ (ros/ has none: its modules are the nodes and bringup;
# cli/ exports main)
API_FOLDERS = ("collision", "files", "identification", "model", "payload", "sampling", "signals", "sim", "stream")
HEAVY = ("scipy", "pinocchio", "mujoco", "sympy", "matplotlib", "rclpy")

# cli/demo.py is rewritten with the node cores (issue 28) and imports by deep path until then: remove it
# from here when it imports through the APIs
# (cli module, imported module, name): deep imports the command line keeps, and why
DEEP_IMPORTS = {
    # the function shares its module's name; an API name cannot (the package attribute is the module
    # once anything imported it)
    ("estimate", "signals.torque_gains", "torque_gains"),
}


def api(folder: str):
    return importlib.import_module(f"payload_estimation.{folder}")


@pytest.mark.parametrize("folder", API_FOLDERS)
def test_every_api_name_imports(folder):
    mod = api(folder)
    assert mod.__all__, f"payload_estimation.{folder} exports nothing"
    assert mod.__doc__, f"payload_estimation.{folder} has no docstring saying what the folder is for"
    submodules = {m.name for m in pkgutil.iter_modules(mod.__path__)}
    clash = sorted(set(mod.__all__) & submodules)
    assert not clash, f"payload_estimation.{folder} exports names of its own modules: {clash}"
    for name in mod.__all__:
        value = getattr(mod, name)
        assert not isinstance(value, type(sys)), f"payload_estimation.{folder}.{name} is a module"
        if callable(value):
            assert value.__module__.startswith(mod.__name__ + "."), \
                f"payload_estimation.{folder}.{name} comes from {value.__module__}, not from the folder"
    exec(f"from payload_estimation.{folder} import *", {})  # noqa: S102 - __all__ is complete
    with pytest.raises(AttributeError, match="no attribute 'not_an_api_name'"):
        mod.not_an_api_name  # noqa: B018


def loaded_after(statement: str) -> set[str]:
    """Heavy external packages a fresh interpreter has loaded after ``statement``."""
    code = f"import sys; {statement}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(out.stdout.split())


@pytest.mark.slow
def test_an_api_and_a_light_module_stay_light():
    """Importing an API loads none of its fits; a light module (the Samples record, a sequence's
    steps, a reaction rule) does not pull in the folder's heavy modules through its __init__."""
    apis = "; ".join(f"import payload_estimation.{f}" for f in API_FOLDERS)
    assert loaded_after(apis) == set()
    assert loaded_after("import payload_estimation.signals.samples, payload_estimation.signals.resample") == set()
    assert loaded_after("import payload_estimation.collision.reaction, payload_estimation.collision.scoring") == set()
    assert loaded_after("import payload_estimation.sim.links, payload_estimation.sim.config") == set()
    assert loaded_after("from payload_estimation.payload import PayloadEstimate") == set()
    assert loaded_after("from payload_estimation.signals import zero_phase_lowpass") == {"scipy"}


def test_the_command_line_loads_its_commands_lazily():
    """`payload_estimation.cli` imports no command module (each loads what it needs when it runs)."""
    assert loaded_after("import payload_estimation.cli; import numpy") == set()
    assert loaded_after("import payload_estimation.cli; assert 'payload_estimation.cli.residual' not in sys.modules, "
                        "'cli imported its commands'") == set()


def deep_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, folder.module, name) of every import in ``path`` (a cli/ module) that reaches past a
    folder's API into one of its modules."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if node.level == 0:
                parts = parts[1:] if parts[0] == "payload_estimation" else []
            elif node.level != 2:
                continue
            if len(parts) >= 2 and parts[0] in API_FOLDERS:
                found += [(node.lineno, ".".join(parts), a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "payload_estimation" and len(parts) >= 3 and parts[1] in API_FOLDERS:
                    found.append((node.lineno, ".".join(parts[1:]), ""))
    return found


@pytest.mark.parametrize("path", sorted((PACKAGE / "cli").glob("*.py")), ids=lambda p: p.name)
def test_commands_import_subpackages_through_their_api(path):
    bad = [f"line {line}: from {mod} import {name}" for line, mod, name in deep_imports(path)
           if (path.stem, mod, name) not in DEEP_IMPORTS]
    assert not bad, f"cli/{path.name} imports past a subpackage's API (use payload_estimation.<folder>): {bad}"


def test_the_deep_import_check_sees_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from ..payload import PayloadEstimate\nfrom ..reporting import format_table\n"
                     "def f():\n    from ..payload.gravity import estimate_payload_gravity\n"
                     "import payload_estimation.signals.samples\nfrom ..ros.bringup import ros_args\n")
    assert sorted((m, n) for _, m, n in deep_imports(probe)) == [("payload.gravity", "estimate_payload_gravity"),
                                                                 ("signals.samples", "")]
