#!/usr/bin/env python3
"""Regenerate the parameter tables of docs/ros_interface.md and config/payload_estimation.yaml from the
nodes' parameter tables (the one copy). test/test_parameters.py fails when they are out of date.

    .venv/bin/python tools/gen_ros_docs.py
"""

from __future__ import annotations

from pathlib import Path

from payload_estimation.ros.interface import DOCS, PARAMS_FILE, render_all

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    docs, params = render_all((ROOT / DOCS).read_text())
    (ROOT / DOCS).write_text(docs)
    (ROOT / PARAMS_FILE).write_text(params)
    print(f"wrote {DOCS} and {PARAMS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
