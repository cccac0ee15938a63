"""``payload_sampler``'s message plumbing: its core's actions and answers to and from ROS (no rules).

The node (:mod:`.sampler_node`) wires these to :class:`sampling.sampler.Sampler`: a commanded motion as a
``joint_trajectory`` message, a service answer from a core call, the outcome of a run at its log severity,
estimator requests left pending when a run ends, a joint_states message waiting in a subscription's queue.
"""

from __future__ import annotations

import numpy as np
from trajectory_msgs.msg import JointTrajectory

from ..sampling.sampler import ERROR, OK, commanded_points, outcome_level
from ..sampling.sampling_run import Finished
from .messages import SAMPLER_MARK, trajectory_msg


def motion_msg(joint_names, act) -> JointTrajectory:
    """The ``joint_trajectory`` of a Move, Hold or Excite action (:func:`sampling.sampler.commanded_points`):
    positions in ``joint_names`` order; without velocities (a move, a hold) the last point's is zero; marked
    :data:`.messages.SAMPLER_MARK`."""
    pts = commanded_points(act)
    vel = None if pts[-1][2] is None else np.array([p[2] for p in pts])
    msg = trajectory_msg(joint_names, np.array([p[1] for p in pts]), [p[0] for p in pts], velocities=vel)
    msg.header.frame_id = SAMPLER_MARK
    return msg


def log_outcome(logger, fin: Finished) -> None:
    """Log a run's outcome at its severity: info when done, error for a fault, warning for what the user asked
    for or a refusal (nothing moved)."""
    level = outcome_level(fin)
    if level == OK:  # one severity per call site: rclpy refuses a call site that changes it
        logger.info(f"sampling done: {fin.text}")
    elif level == ERROR:
        logger.error(f"sampling aborted: {fin.text}")
    else:
        logger.warning(f"sampling aborted: {fin.text}")


def drop_pending(futures: list) -> None:
    """Withdraw the (client, future) requests not answered yet and empty ``futures``."""
    for client, future in futures:
        if not future.done():
            try:
                client.remove_pending_request(future)
            except Exception:  # noqa: BLE001 - the server went away: nothing left to clean up
                pass
    futures.clear()


__all__ = ["motion_msg", "log_outcome", "drop_pending"]
