"""The collision monitor's status: the line and the values ``~/status`` and ``/diagnostics`` publish.

:func:`monitor_status` is never silently blind: ERROR without a robot model, before the first joint_states,
while they are lost and while the torque runs opposite to the model; WARN during a reported collision; else OK
with the payload in use. :func:`status_values` gives the keys of the payload, the announced change, the
reaction, the detector, the observer, the last contact estimate and a threshold calibration in progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..levels import ERROR, OK, WARN, Level
from .monitor_inputs import MonitorInputs
from .reaction import ReactionState

if TYPE_CHECKING:
    from .supervisor import MonitorSupervisor


def status_values(sup: MonitorSupervisor | None, policy: str) -> dict:
    """Status keys of the payload, the announced change, the reaction, the detector, the observer and the last
    contact estimate (``sup`` None: no robot model yet; ``policy`` the configured one)."""
    if sup is None:
        return {"payload_mass": 0.0, "payload_source": "none", "reaction_state": ReactionState.MOVING.value,
                "policy": policy, "payload_event": "", "payload_event_open": False, "payload_learning": False}
    p, w, det, obs, c = sup.payload, sup.watch, sup.mon.detector, sup.mon.observer, sup.contact
    vals = {"payload_mass": 0.0 if p is None else p.mass, "payload_source": "none" if p is None else p.method,
            "reaction_state": sup.reaction.state.value, "policy": sup.reaction.policy, "payload_event": w.last_change,
            "payload_event_open": w.announced is not None, "payload_learning": w.learning,
            "events": len(det.events) + (det.current is not None),  # the one in progress counts
            "thresholds": [round(float(x), 3) for x in np.broadcast_to(det.current_thresholds(), (det.n,))]}
    ev = det.current
    if ev is not None:
        vals.update({"link": ev.link_name, "peak": ev.peak_max, "onset_time": ev.onset_time,
                     "detection_time": ev.detection_time})
    last = det.events[-1] if det.events else None  # the keys above are the collision in progress only
    vals["last_collision"] = "" if last is None else (
        f"{last.link_name or 'link unknown'}, peak {last.peak_max:.2f} N m on joint {last.peak_joint + 1}, detected "
        f"at t={last.detection_time:.3f} s, released at t={last.release_time:.3f} s")
    if c is not None:
        lo, hi = c.force_range
        vals.update({"contact": c.summary(), "contact_link": c.link_name, "link_probability": c.link_probability,
                     "link_ambiguous": c.link_ambiguous, "force_norm": c.force_norm,
                     "force_ambiguous": c.force_ambiguous,
                     "force_range_N": f"{lo:.1f}..{hi:.1f}" if np.isfinite(hi) else f"{lo:.1f}..unbounded",
                     "fit_residual": c.fit_residual})
    vals["threshold_calibration"] = "" if sup.recorder is None else f"recording: {sup.recorder.summary()}"
    j = int(np.argmax(det.peak_ratio))
    vals.update({"residual_peak_ratio": round(float(det.peak_ratio[j]), 3), "residual_peak_joint": j + 1})
    return {**vals, "observer_gaps": obs.gaps, "samples_skipped": obs.skipped}


def monitor_status(sup: MonitorSupervisor | None, policy: str, inputs: MonitorInputs, model_error: str,
                   age: float | None, lost: bool) -> tuple[Level, str, dict]:
    """(level, message, values) of the monitor's status: never silently blind, ERROR without a robot model
    (``model_error`` says why: ``sup`` None), before the first joint_states (``age`` None) and while they are
    ``lost`` (``age`` wall s); WARN during a reported collision; else OK with the payload in use."""
    vals = {**status_values(sup, policy), "collision": sup is not None and sup.collision, **inputs.values()}
    if sup is not None:
        vals.update({"threshold_scale": round(sup.widening, 3), "payload_sigma": sup.sigma_in_use,
                     "payload_losses": sup.losses, "payload_lost": "" if sup.lost is None else sup.lost.reason})
    if sup is None:
        level, text = ERROR, f"not monitoring: no robot model ({model_error})"
    elif age is None:
        level, text = ERROR, "not monitoring: no joint_states received yet"
    elif lost:
        level, text = ERROR, f"not monitoring: joint_states lost for {age:.2f} s (collision detection is blind)"
    elif sup.sign.fault is not None:
        level, text = ERROR, f"not monitoring: {sup.sign.fault}"
    elif sup.collision:
        level, text = WARN, f"collision on {vals.get('link', '?')}"
    else:
        p = sup.payload
        level, text = OK, f"monitoring ({'unloaded' if p is None else f'{p.method} payload {p.mass:.3f} kg'})"
        if sup.watch.announced is not None:
            text += f"; {sup.watch.announced.kind} announced: payload being learned"
    if vals["policy"] == "none" and level == OK:
        text += "; reaction disabled (policy none)"
    return level, text, vals


__all__ = ["monitor_status", "status_values"]
