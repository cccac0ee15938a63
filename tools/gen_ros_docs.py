#!/usr/bin/env python3
"""Regenerate docs/ros_interface.md, config/payload_estimation.yaml and payload_estimation/ros/parameter_names.py
from the code (the one copy):

- the parameter tables, the package's parameter file and every node's parameter names from the nodes' parameter
  tables;
- the service and topic tables from the nodes themselves: each node is started in-process (real rclpy,
  an isolated DDS domain) and the ROS graph says what it created (``ros/interface_docs.py``). Kind, name
  and type come from the code; the notes column is kept from the docs, a new service or topic gets a
  placeholder note to fill in, a removed one disappears.

test/integration/test_parameters.py and test/integration/test_ros_interface_docs.py fail when the files are out of date.

    .venv/bin/python tools/gen_ros_docs.py
"""

from __future__ import annotations

import os
from pathlib import Path

from payload_estimation.ros.domain import isolate

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    isolate()  # before rclpy starts: the nodes started for introspection stay on this machine, own domain
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    from payload_estimation.ros.interface import DOCS, NAMES, PARAMS_FILE, node_tables, render_all, render_names
    from payload_estimation.ros.interface_docs import UNDESCRIBED, introspect, render_interface_docs

    docs, params = render_all((ROOT / DOCS).read_text())
    docs = render_interface_docs(docs, introspect())
    (ROOT / DOCS).write_text(docs)
    (ROOT / PARAMS_FILE).write_text(params)
    (ROOT / NAMES).write_text(render_names(node_tables()))
    print(f"wrote {DOCS}, {PARAMS_FILE} and {NAMES}")
    if (new := docs.count(UNDESCRIBED)):
        print(f"{new} service(s)/topic(s) have no notes yet in {DOCS}: search for '{UNDESCRIBED}'")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
