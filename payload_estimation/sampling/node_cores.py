"""The three nodes' cores wired as the nodes wire them, in one process and without a transport.

:class:`NodeCores` holds the payload_sampler's :class:`.sampler.Sampler` (its static pre-check), the
payload_estimator's :class:`payload.estimator.PayloadEstimator` and the collision_monitor's
:class:`collision.supervisor.MonitorSupervisor` for one robot model, and does what the topics and services between
the nodes do: every joint_states sample reaches all three (the estimator's 10 Hz recording preparation included);
a run's ``active`` flag reaches the monitor; a run's request reaches the estimator service of its mode
(:func:`estimator_service`, :data:`.sampler.ESTIMATOR_SERVICES`: the node's choice) and an estimate the
estimator accepts reaches the monitor, as ``payload/estimate`` does. What moves the arm (moves, holds,
excitations) and where planning runs stay the caller's (the bare run: the simulated arm, inline).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..collision.monitor import MonitorConfig
from ..collision.supervisor import EstimateRefused, MonitorSupervisor, SupervisorConfig, SupervisorStep
from ..errors import PayloadEstimationError
from ..model.dynamics import RigidBodyDynamics
from ..payload.estimate import PayloadEstimate
from ..payload.estimator import LOADED, PREPARE_PERIOD, EstimateOutcome, EstimatorConfig, PayloadEstimator
from .excitation_sequence import Record
from .run_states import RunMode
from .sampler import ESTIMATOR_SERVICES, Sampler
from .sampling_run import ClearCaptures, SetActive
from .sequence import Capture, Estimate


def estimator_service(mode: RunMode, act) -> str:
    """The payload_estimator service a run of ``mode`` calls for the action ``act`` ("" for an action that calls
    none): ``clear_captures``, or the (capture or record, estimate) pair of :data:`.sampler.ESTIMATOR_SERVICES`."""
    if isinstance(act, ClearCaptures):
        return "clear_captures"
    if isinstance(act, (Capture, Record)):
        return ESTIMATOR_SERVICES[mode][0]
    if isinstance(act, Estimate):
        return ESTIMATOR_SERVICES[mode][1]
    return ""


class NodeCores:
    """The sampler's, estimator's and monitor's cores of one robot model, connected as the nodes are (see the module
    docstring). ``limit_check``: the monitor's payload limit check (``payload.limits.check_payload`` as the node)."""

    def __init__(self, dyn: RigidBodyDynamics, estimator: EstimatorConfig, monitor: MonitorConfig,
                 supervisor: SupervisorConfig, limit_check: Callable | None = None):
        desc = dyn.desc
        self.estimator = PayloadEstimator(estimator, look_for_calibration=False)
        self.estimator.set_robot(dyn, desc.joint_names)
        self.sampler = Sampler()  # its static pre-check, with the estimator's static test as the node's
        self.sampler.configure(estimator.settle, desc.joint_names)
        self.monitor = MonitorSupervisor(dyn, monitor, supervisor, frame=desc.payload_frame_name,
                                         limit_check=limit_check)
        self.active = False  # the sampler's active flag as the monitor has it
        self.monitor_refusal = ""  # why the monitor refused the last estimate ("" if it took it)
        self._prepare_at = 0.0  # s, the estimator node's next 10 Hz recording preparation

    def joint_state(self, t: float, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> SupervisorStep:
        """A joint_states sample at ``t`` (s) for every node: the estimator's window (and its recording's model
        terms every PREPARE_PERIOD s), the sampler's pre-check window, the monitor's step (returned)."""
        self.estimator.add_sample(t, q, dq, tau)
        if t >= self._prepare_at:  # the node's 10 Hz timer: the recording's model terms so far
            self.estimator.prepare_recording()
            self._prepare_at = t + PREPARE_PERIOD
        self.sampler.joint_state(t, q, dq, tau)
        return self.monitor.update(t, q, dq, tau)

    def carry_out(self, mode: RunMode, act) -> tuple[tuple[str, bool, str] | None, PayloadEstimate | None]:
        """The nodes' side of a run's action ``act`` in a run of ``mode``: ``active`` to the monitor, a request to
        the estimator service of the mode. Returns (the answer for :meth:`.sampling_run.SamplingRun.answered`:
        (kind, ok, text), None when none is awaited; the estimate the estimator accepted, else None). Actions
        that move the arm or plan are the caller's: (None, None)."""
        if isinstance(act, SetActive):
            self.active = act.active
            self.monitor.set_sampling(act.active)
            return None, None
        service = estimator_service(mode, act)
        if not service:
            return None, None
        if service == "clear_captures":
            self.estimator.clear()
            return None, None
        kind = "capture" if isinstance(act, Capture) else "record" if isinstance(act, Record) else "estimate"
        answer = self._call(service)
        if isinstance(answer, EstimateOutcome):
            if answer.estimate is not None:
                try:
                    self.monitor.estimate(answer.estimate, answer.estimate.frame)  # payload/estimate
                except EstimateRefused as e:  # the monitor keeps its provisional payload, as the node does
                    self.monitor_refusal = str(e)
            return (kind, answer.ok, answer.message), answer.estimate
        return (kind, answer.ok, answer.message), None

    def _call(self, service: str):
        """The estimator core's answer to ``service`` (the estimator node's mapping of its services)."""
        est = self.estimator
        calls = {"capture": lambda: est.capture(LOADED, 0.0), "start_recording": est.start_recording,
                 "estimate": est.estimate, "estimate_motion": est.estimate_motion,
                 "store_reference": est.store_reference}
        if service not in calls:  # capture_calibration / calibrate: a sweep writes a calibration file
            raise PayloadEstimationError(f"the in-process cores do not run payload_estimator/{service} (a sweep "
                                         "calibrates into a file: run the nodes)")
        return calls[service]()


__all__ = ["NodeCores", "estimator_service"]
