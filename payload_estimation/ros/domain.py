"""Pick an isolated ROS_DOMAIN_ID for a run of nodes (tests, demo, benchmarks). No rclpy import."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

_held: list = []


def claim_ros_domain() -> int:
    """A ROS_DOMAIN_ID (1..100) no other claimant on this machine holds; held until this process exits.

    A process-id-derived id collides between concurrent runs; an exclusive lock per id does not.
    Child processes inherit the id through the environment (see :func:`isolate`).
    """
    lock_dir = Path(tempfile.gettempdir()) / "payload_estimation_ros_domains"
    lock_dir.mkdir(exist_ok=True)
    start = os.getpid() % 100
    for k in range(100):
        domain = 1 + (start + k) % 100
        f = open(lock_dir / f"{domain}.lock", "w")  # noqa: SIM115 - held open for the process lifetime
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _held.append(f)
        return domain
    raise RuntimeError(f"all ROS domain ids 1..100 are held by other runs (locks in {lock_dir})")


def isolate(domain: int | None = None) -> int:
    """Set ROS_DOMAIN_ID (claimed unless given) and localhost-only discovery for this process and its
    children; call before rclpy is initialised. Returns the domain id."""
    d = claim_ros_domain() if domain is None else int(domain)
    os.environ["ROS_DOMAIN_ID"] = str(d)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return d
