"""`./run test PATH` (issue 47: the README says `./run test test/unit` runs on two processes; it ran on one):
test/unit or a folder in it runs on PE_TEST_WORKERS processes, anything else (a file, a test id) as given, and
-n given by the user wins. Nothing is collected here (-k matches no test), only the worker count is read."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NONE = ["-k", "no_test_has_this_name", "--ignore-glob", "test/unit/test_[b-z]*", "-p", "no:cacheprovider"]


def run_test(*args: str, workers: str = "2") -> str:
    env = {**os.environ, "PE_TEST_WORKERS": workers, "PYTEST_ADDOPTS": ""}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run([str(ROOT / "run"), "test", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode in (0, 5), proc.stdout[-2000:] + proc.stderr[-2000:]  # 5: nothing selected
    return proc.stdout


@pytest.mark.parametrize("path", ["test/unit", "test/unit/", "./test/unit"])
def test_the_unit_tests_by_path_run_on_pe_test_workers_processes(path):
    assert "2 workers [0 items]" in run_test(path, *NONE)
    assert "3 workers [0 items]" in run_test(path, *NONE, workers="3")


def test_a_file_or_a_given_n_runs_as_given():
    assert "workers" not in run_test("test/unit/test_architecture.py", *NONE)
    assert "workers" not in run_test("test/unit", "-n", "0", *NONE)
