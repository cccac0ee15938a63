"""What counts as a payload is one copy (``payload_estimation.node_limits``): the estimator rejects what the
monitor refuses, the monitor's payload-change window and the sampler's slowed moves assume the same heaviest
payload, and the nodes' ``max_payload`` / ``max_com_radius`` parameters default to it."""

from __future__ import annotations

from payload_estimation.collision.estimate_gate import EstimateGateConfig
from payload_estimation.collision.payload_change import WatchConfig
from payload_estimation.collision.supervisor import SupervisorConfig
from payload_estimation.node_limits import MAX_COM_RADIUS, MAX_PAYLOAD
from payload_estimation.payload.estimator import NODE_LIMITS, EstimatorConfig
from payload_estimation.payload.online import OnlineConfig
from payload_estimation.payload.result import PayloadLimits
from payload_estimation.ros.estimator_params import PARAMS as ESTIMATOR_PARAMS
from payload_estimation.ros.monitor_params import PARAMS as MONITOR_PARAMS
from payload_estimation.sampling.sampling_run import RunConfig


def test_the_estimator_the_monitor_and_the_sampler_count_the_same_payload():
    limits = (MAX_PAYLOAD, MAX_COM_RADIUS)
    assert NODE_LIMITS == PayloadLimits(*limits) and EstimatorConfig().fit.limits == NODE_LIMITS
    sup = SupervisorConfig()
    assert (sup.max_payload, sup.max_com_radius) == limits
    assert (WatchConfig().max_payload, WatchConfig().max_com_radius) == limits
    assert (sup.watch().max_payload, sup.watch().max_com_radius) == limits
    assert (EstimateGateConfig().max_payload, EstimateGateConfig().max_com_radius) == limits
    assert OnlineConfig().limits == NODE_LIMITS  # the online estimate's (a copy of the numbers there)
    assert RunConfig().mass_limit == MAX_PAYLOAD
    for table in (ESTIMATOR_PARAMS, MONITOR_PARAMS):
        assert (table.by_name["max_payload"].default, table.by_name["max_com_radius"].default) == limits
    assert PayloadLimits().max_payload > MAX_PAYLOAD  # the fits' own default is wider: not this rule
