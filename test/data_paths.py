"""Where the tests find their input files: one rule for every test file.

- ``URDF_DIR`` (test/data/urdf): the real-stack URDFs (Apache-2.0), vendored with their licences, so a clone
  of the repository alone runs every test that uses them.
- ``dataset(...)``: the external recordings (GPL-3.0 / LGPL-3.0), never copied into the repository. They sit
  in ``shared/datasets`` beside the repository (CI: beside the fresh clone; worktrees: further up). A test
  that needs one carries ``@pytest.mark.needs_data(path)`` (test/conftest.py): absent, it skips with a
  one-line reason; absent under CI (``CI=true``), it fails, so CI cannot silently stop running it.
"""

from __future__ import annotations

import os
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent
URDF_DIR = TEST_DIR / "data" / "urdf"
DATASETS = next((p / "shared/datasets" for p in TEST_DIR.parents if (p / "shared/datasets").is_dir()),
                TEST_DIR.parents[1] / "shared/datasets")


# the vendored real-stack URDFs: file -> (joint names, tip link = payload frame)
ROBOTS = {
    "iiwa14": ([f"lbr_A{i}" for i in range(1, 8)], "lbr_link_ee"),
    "iiwa7": ([f"lbr_A{i}" for i in range(1, 8)], "lbr_link_ee"),
    "med14": ([f"lbr_A{i}" for i in range(1, 8)], "lbr_link_ee"),
    "fr3": ([f"fr3_joint{i}" for i in range(1, 8)], "fr3_link8"),
    "fr3_hand": ([f"fr3_joint{i}" for i in range(1, 8)], "fr3_hand_tcp"),
}


def urdf(name: str) -> Path:
    """A vendored real-stack URDF by its stem, e.g. ``urdf("fr3")`` -> test/data/urdf/fr3.urdf."""
    return URDF_DIR / f"{name}.urdf"


def dataset(relative: str) -> Path:
    """A file or folder of the external datasets, e.g. ``dataset("lwr4-iit/kuka_lwr4_gaz.urdf")``: where it
    is, or where it is expected (``../shared/datasets`` beside the repository) when absent."""
    return DATASETS / relative


def on_ci() -> bool:
    """CI runs set CI (GitHub Actions, GitLab: ``CI=true``); ``CI=false``/``0`` count as not CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
