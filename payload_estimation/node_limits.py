"""What the nodes count as a payload: at most :data:`MAX_PAYLOAD` kg, its CoM within :data:`MAX_COM_RADIUS` m
of the payload frame origin (the fits' own defaults, :class:`payload.result.PayloadLimits`, are wider).

One copy for the layers that may not import each other: the estimator rejects a heavier or off-centre fit
(``payload.estimator.NODE_LIMITS``), the collision monitor refuses such an estimate
(``collision.estimate_gate.EstimateGateConfig``) and bounds what a payload change may explain
(``collision.payload_change.WatchConfig``), a sampling run refuses a heavier load (``sampling.sampling_run``);
the nodes' ``max_payload`` and ``max_com_radius`` parameters default to these (``ros.node_support.LIMIT_PARAMS``,
through ``NODE_LIMITS``). ``test_node_limits`` checks that every one of them starts from here.
"""

MAX_PAYLOAD = 15.0
"""kg, the heaviest plausible payload."""

MAX_COM_RADIUS = 0.5
"""m, the largest plausible CoM distance from the payload frame origin."""

__all__ = ["MAX_PAYLOAD", "MAX_COM_RADIUS"]
