"""The collision monitor's ``~/start_threshold_calibration``, ``~/finish_threshold_calibration`` and
``~/cancel_threshold_calibration`` (std_srvs/Trigger): the core's live calibration
(:class:`collision.live_calibration.LiveCalibration`) asked, its thresholds set as the ``thresholds`` parameter and
written as a parameter file, the answer logged and the status published."""

from __future__ import annotations

import threading
from pathlib import Path

from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from ..collision.supervisor import CalibrationRefused, MonitorSupervisor
from .monitor_setup import PendingParameters
from .node_support import THROTTLE_S, answer


class ThresholdCalibrationServices:
    """The three services of ``node`` (a ``CollisionMonitorNode``: its ``sup``, ``model``, ``values``,
    ``joint_names`` and ``status``). Only the supervisor's part runs under ``lock`` (the node's state lock): the
    joint_states thread never waits for a file or for the parameter change (which takes the lock itself).
    ``pending``: the node's changed parameters waiting for a safe point."""

    def __init__(self, node, lock: threading.RLock, pending: PendingParameters):
        self.node = node
        self.lock = lock
        self.pending = pending
        for name, callback in {"start_threshold_calibration": self._start,
                               "finish_threshold_calibration": self._finish,
                               "cancel_threshold_calibration": self._cancel}.items():
            node.create_service(Trigger, f"~/{name}", callback)

    def _answer(self, response, call):
        """Answer a calibration service with ``call(sup)``'s (changed, message), logged, the status published."""
        node = self.node

        def guarded():
            if node.sup is None:
                raise CalibrationRefused(f"no robot model yet ({node.model.error or 'waiting for robot_description'})")
            return call(node.sup)

        changed = answer(response, guarded)
        if changed:
            node.get_logger().info(response.message)
            node.status.publish()
        else:
            node.get_logger().warning(f"threshold calibration: {response.message}", throttle_duration_sec=THROTTLE_S)
        return response

    def _start(self, request, response):
        with self.lock:
            return self._answer(response, lambda sup: (True, sup.start_calibration()))

    def _cancel(self, request, response):
        with self.lock:
            return self._answer(response, lambda sup: (True, sup.cancel_calibration()))

    def _finish(self, request, response):
        return self._answer(response, self._finish_calibration)

    def _finish_calibration(self, sup: MonitorSupervisor) -> tuple[bool, str]:
        """The recording's thresholds set as the ``thresholds`` parameter (they apply as any change of it: once no
        collision is reported) and, with ``threshold_calibration_file``, written as a parameter file."""
        node = self.node
        with self.lock:
            cal = sup.finish_calibration(float(node.values["threshold_calibration_safety"]),
                                         float(node.values["threshold_calibration_minimum"]))
        thresholds = cal.to_dict()["thresholds"]
        result = node.set_parameters([Parameter("thresholds", value=thresholds)])[0]
        if not result.successful:
            raise CalibrationRefused(f"the calibrated thresholds {thresholds} N m were refused: {result.reason}; the "
                                     "thresholds are unchanged")
        lines = cal.lines(node.joint_names)
        with self.lock:
            waits = "thresholds" in self.pending.waiting(sup)
        lines.append("applied: thresholds " + str(thresholds) + " N m"
                     + (" once the collision reported now is released" if waits else ""))
        path = str(node.values["threshold_calibration_file"])
        if path:
            try:
                Path(path).write_text(cal.params_file(f"the live residual of {node.get_fully_qualified_name()}",
                                                      node=node.get_name()))
                lines.append(f"written to {path} (give it to this node with --params-file)")
            except OSError as e:
                lines.append(f"NOT written to {path}: {e} (the thresholds are applied; ros2 param dump keeps them)")
        return True, "\n".join(lines)
