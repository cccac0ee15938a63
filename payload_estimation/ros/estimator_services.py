"""The payload estimator's ``~/`` services (std_srvs/Trigger): each request turned into a call of the core
(:class:`payload.estimator.PayloadEstimator`) and its :class:`payload.estimator.Answer` into the response, the
estimate published and exported, the grasp or release announced on ``~/payload_event``, the answer logged."""

from __future__ import annotations

import time

from rclpy.parameter import Parameter
from std_msgs.msg import String
from std_srvs.srv import Trigger

from ..files.exports import write_exports
from ..payload.announcement_relay import RELAY_WINDOW
from ..payload.estimate import NO_PAYLOAD, PayloadEstimate
from ..payload.estimator import CALIBRATION, CAPTURE_WORDS, LOADED, UNLOADED, Answer
from .messages import clock_seconds
from .node_support import THROTTLE_S, log_notes

NO_LISTENER = "no collision monitor listens"
"""The phrase of a grasped / released answer whose announcement no collision monitor received."""


def reply(answer: Answer, response):
    """A Trigger ``response`` from the core's ``answer``."""
    response.success, response.message = answer.ok, answer.message
    return response


class EstimatorServices:
    """The services of ``node`` (a ``PayloadEstimatorNode``: its ``core``, ``model``, ``input``, ``values``,
    ``pub_event``, ``status`` and :meth:`publish_estimate`); ``flush()`` takes the joint_states waiting in the
    subscription's batch (a request reads the newest samples)."""

    def __init__(self, node, flush):
        self.node = node
        self.flush = flush
        core = node.core
        services = {"capture": lambda q, r: self._capture(LOADED, r),
                    "capture_unloaded": lambda q, r: self._capture(UNLOADED, r),
                    "estimate": lambda q, r: self._estimate(core.estimate, r),
                    "reset": lambda q, r: self._unloaded(core.forget(node.model.error), r),
                    "clear_captures": lambda q, r: reply(core.clear(), r),
                    "capture_calibration": lambda q, r: self._capture(CALIBRATION, r),
                    "calibrate": self._calibrate,
                    "start_recording": lambda q, r: reply(self._refusal("recording") or core.start_recording(),
                                                          r),  # _refusal took the samples before the request
                    "store_reference": self._store_reference,
                    "estimate_motion": lambda q, r: self.flush() or self._estimate(core.estimate_motion, r),
                    # announced grasp / release: the collision monitor learns the change instead of stopping the arm
                    "grasped": self._grasped, "released": self._released}
        for name, callback in services.items():
            node.create_service(Trigger, f"~/{name}", callback)

    def _refusal(self, what: str, stream: bool = True) -> Answer | None:
        node = self.node
        if stream:
            self.flush()
        age, lost = (None, False) if node.input is None else (node.input.age(), node.input.lost())
        return node.core.refusal(what, node.model.error, age, lost, stream)

    def _capture(self, kind: str, response):
        a = self._refusal(CAPTURE_WORDS[kind]) or self.node.core.capture(kind, self.node.input.age())
        if not a.ok:
            self.node.get_logger().warning(a.message, throttle_duration_sec=THROTTLE_S)
        return reply(a, response)

    def _calibrate(self, request, response):
        """Identify the unloaded gravity model (with offsets) from the calibration captures, write it and use it."""
        node, core = self.node, self.node.core
        a = self._refusal("calibrate", stream=False)
        if a is not None:
            return reply(a, response)
        path = core.calibration_path()
        a = core.calibrate(path)
        if a.ok:
            res = node.set_parameters([Parameter("gravity_model", value=str(path))])[0]
            if res.successful:
                core.calibrated()
                node.get_logger().info(a.message)
                return reply(a, response)
            a = Answer(False, f"calibrate: {path} written but not loaded: {res.reason}", fault=True)
        if a.fault:
            node.get_logger().error(a.message)
        return reply(a, response)

    def _estimate(self, fit, response):
        """``fit()`` (the core's static or motion fit): publish an accepted estimate, export it and answer; a
        rejected fit keeps the previous payload (the core's status says so)."""
        node, log = self.node, self.node.get_logger()
        a = self._refusal("estimate", stream=False)
        if a is not None:
            return reply(a, response)
        out = fit()
        response.success, response.message = out.ok, out.message
        if out.fit_failed:
            log.error(out.message)
            node.status.publish()
        if not out.ok:
            return response
        node.publish_estimate(out.estimate)
        if out.imprecise:
            log.warning(f"payload estimate {out.message}")  # IMPRECISE (why): the estimate
        exported = node.core.export(out.estimate, str(node.values["export_dir"]), self._write_exports)
        response.message += exported.message
        if exported.fault:
            log.error(f"{exported.message[2:]}; the estimate is published but not written: set "
                      "export_dir to a directory this node can write")
            node.status.publish()
        log.info(f"payload estimate: {response.message}")
        return response

    def _write_exports(self, est: PayloadEstimate, directory: str):
        """The estimate's export files in ``directory``; returns that directory."""
        robot = str(self.node.values["robot"])  # the estimate's model places the flange (base_link/tip_link included)
        dyn = self.node.dyn
        return write_exports(est, directory, model=robot or "robot_description",
                             robot=dyn.desc if robot and dyn is not None else None)[0].parent

    def _store_reference(self, request, response):
        self.flush()
        a = self.node.core.store_reference()
        if a.fault:
            self.node.get_logger().error(a.message, throttle_duration_sec=2.0)
        elif a.ok:
            self.node.get_logger().info(a.message)
            self.node.status.publish()
        return reply(a, response)

    def _unloaded(self, a: Answer, response):
        """Answer a reset or release: 0 kg published when it was taken."""
        if a.ok:
            self.node.publish_estimate(NO_PAYLOAD)
            self.node.get_logger().info(a.message)
        return reply(a, response)

    def _announce(self, event: str) -> str:
        """Publish ``event`` on ~/payload_event (the collision monitor's cue); a warning phrase if nobody listens."""
        pub = self.node.pub_event
        pub.publish(String(data=event))
        listeners = pub.get_subscription_count()
        self.node.core.announcements.published(event, listeners, time.monotonic())
        if listeners == 0:
            return (f"; WARNING: {NO_LISTENER} on payload_estimator/payload_event yet, so it did not get this "
                    f"announcement (sent again if one appears within {RELAY_WINDOW:g} s, status "
                    "announcement_unheard; not running in this namespace, or not discovered yet)")
        return ""

    def _grasped(self, request, response):
        """An object was grasped: its payload is unknown until estimated; the monitor learns it provisionally."""
        node = self.node
        self.flush()  # the samples waiting in the batch are before the grasp: how late this node is, without them
        log_notes(node.get_logger(), node.core.use_online_model())
        a = node.core.announce_grasp(self._announce("grasped"), at=clock_seconds(node))
        node.get_logger().info(a.message)
        node.status.publish()
        return reply(a, response)

    def _released(self, request, response):
        """The object was released: forget the payload (as ~/reset); the monitor expects its torque to vanish."""
        listening = self._announce("released")  # before the 0 kg estimate: the monitor opens its window first
        return self._unloaded(self.node.core.announce_release(listening, self.node.model.error), response)
