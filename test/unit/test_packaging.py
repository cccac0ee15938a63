"""package.xml declares every import of the package, each as a key rosdep resolves."""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
# import name -> rosdep key where they differ (ROS packages are their own key)
KEYS = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "sympy": "python3-sympy",
    "yaml": "python3-yaml",
    "matplotlib": "python3-matplotlib",
    "pinocchio": "pinocchio",
    "mujoco": "python3-mujoco-pip",
    "rosbags": "python3-rosbags-pip",
}


def third_party_imports() -> set[str]:
    found = set()
    for path in [*ROOT.glob("payload_estimation/**/*.py"), *ROOT.glob("launch/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {n.split(".")[0] for n in names}
    return {n for n in found if n not in sys.stdlib_module_names and n not in ("payload_estimation", "__future__")}


def test_every_import_is_declared_and_every_pip_key_is_defined():
    declared = {e.text for e in ET.parse(ROOT / "package.xml").getroot() if e.tag.endswith("depend")}
    imports = third_party_imports()
    assert {"numpy", "rclpy", "mujoco", "rosbags", "pinocchio"} <= imports  # the scan sees them
    missing = sorted(f"{n} ({KEYS.get(n, n)})" for n in imports if KEYS.get(n, n) not in declared)
    assert not missing, f"imports without an exec_depend in package.xml: {missing}"
    own = yaml.safe_load((ROOT / "rosdep.yaml").read_text())
    pip_keys = {k for k in declared if k.endswith("-pip")}
    assert pip_keys == set(own), "pip-only keys must be defined in rosdep.yaml"
    for key in pip_keys:
        assert own[key]["ubuntu"]["pip"]["packages"] == [key.removeprefix("python3-").removesuffix("-pip")]
