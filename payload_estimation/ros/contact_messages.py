"""The contact estimate as messages: ``~/contact`` (JSON), ``~/contact_wrench`` and ``~/contact_marker``."""

from __future__ import annotations

import json
import math

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, WrenchStamped
from std_msgs.msg import String
from visualization_msgs.msg import Marker

from ..collision.contact import ContactEstimate
from .messages import time_to_sec


def contact_json(c: ContactEstimate, stamp: float) -> str:
    """~/contact: :meth:`ContactEstimate.to_dict` with ``stamp`` (s, the joint_states sample it was made at)
    and ``summary`` (the one line the node logs); a value that is not finite (an unbounded force range, an
    unobservable point) is null."""

    def finite(v):
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, list):
            return [finite(x) for x in v]
        return v

    return json.dumps({"stamp": stamp, "summary": c.summary(), **{k: finite(v) for k, v in c.to_dict().items()}})


def contact_line(c: ContactEstimate) -> str:
    """The log line of a contact estimate: the core's own words (link, probability, force and its range), the
    point in the base frame when it is determined, the fit residual."""
    return (c.summary() + ("" if c.point is None else f", point {np.round(c.point, 3).tolist()} m (base frame)")
            + f", fit residual {c.fit_residual:.2f} N m")


def contact_marker(c: ContactEstimate, stamp, scale: float = 0.01) -> Marker:
    """An RViz arrow ending at the contact point, along the force (``scale`` m per N), in the link frame."""
    m = Marker()
    m.header.stamp, m.header.frame_id = stamp, c.link_name
    m.ns, m.id, m.type, m.action = "contact", 0, Marker.ARROW, Marker.ADD
    tip = np.asarray(c.point_link if c.point_link is not None else c.best_point_link, float)
    tail = tip - scale * np.asarray(c.force_link, float)
    m.points = [Point(x=float(a), y=float(b), z=float(z)) for a, b, z in (tail, tip)]
    m.scale.x, m.scale.y, m.scale.z = 0.01, 0.02, 0.03  # shaft and head diameters, head length (m)
    m.color.r, m.color.a = 1.0, 1.0
    m.color.g = 0.6 if c.force_ambiguous or c.link_ambiguous else 0.0  # orange: ambiguous
    m.lifetime.sec = 5
    return m


def contact_wrench(c: ContactEstimate, stamp) -> WrenchStamped | None:
    """The best fit's force (N) and its torque about the link frame's origin (N m) in the contact link's frame,
    also when ambiguous (the status and the marker's colour say so); None when no link explains the torque."""
    point = c.point_link if c.point_link is not None else c.best_point_link
    if c.force_link is None or point is None:
        return None
    w = WrenchStamped()
    w.header.stamp, w.header.frame_id = stamp, c.link_name
    f, m = c.force_link, np.cross(point, c.force_link)
    w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = (float(x) for x in f)
    w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = (float(x) for x in m)
    return w


def contact_messages(c: ContactEstimate, stamp: Time) -> tuple[String, WrenchStamped | None, Marker | None]:
    """The messages of a contact estimate made at the joint_states sample stamped ``stamp``: ``~/contact``
    (:func:`contact_json`), and ``~/contact_wrench`` and ``~/contact_marker`` (None both when no link explains
    the torque: nothing to show)."""
    record = String(data=contact_json(c, time_to_sec(stamp)))
    wrench = contact_wrench(c, stamp)
    return record, wrench, None if wrench is None else contact_marker(c, stamp)


__all__ = ["contact_json", "contact_line", "contact_marker", "contact_messages", "contact_wrench"]
