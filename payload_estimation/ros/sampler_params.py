"""``payload_sampler``'s parameters: the one table of defaults, ranges and docs, and its map to the core.

:data:`PARAMS` declares every parameter (docs/ros_interface.md and config/payload_estimation.yaml are generated
from it); :func:`sampler_config` turns its values into the core's :class:`sampling.sampler.SamplerConfig`. The
defaults of this node's own rows are that config's (one copy, also what a bare run and the benches use); the
shared ``joint_state_timeout`` row equals it (test_sampler checks).
"""

from __future__ import annotations

from dataclasses import fields

from ..sampling.sampler import SamplerConfig
from .node_support import ROBOT_PARAMS, SETTLE_PARAMS, STREAM_PARAMS
from .parameters import Param, ParameterTable

NEXT_RUN = "next ~/sample"

_D = SamplerConfig()  # the defaults

PARAMS = ROBOT_PARAMS + STREAM_PARAMS + SETTLE_PARAMS + ParameterTable([
    Param("n_poses", _D.n_poses, "static samples including the pick configuration (Gaz & De Luca 2017: 10)", low=4,
          high=50, applies=NEXT_RUN),
    Param("amplitude_deg", _D.amplitude_deg,
          "deg, per-joint perturbation around the pick configuration (Gaz & De Luca 2017: ±7°)", low=0.0, high=10.0,
          low_open=True, applies=NEXT_RUN),
    Param("limit_margin_deg", _D.limit_margin_deg,
          "deg kept from the joint position limits", low=0.0, high=20.0, applies=NEXT_RUN),
    Param("velocity_scale", _D.velocity_scale,
          "peak joint speed of a move as a fraction of the velocity limit (quintic)",
          low=0.0, high=1.0, low_open=True, applies=NEXT_RUN),
    Param("min_duration", _D.min_duration, "s, shortest move", low=0.0, high=10.0, low_open=True, applies=NEXT_RUN),
    Param("arrival_tolerance_deg", _D.arrival_tolerance_deg,
          "deg per joint for 'arrived'", low=0.0, high=5.0, low_open=True,
          applies=NEXT_RUN),
    Param("arrival_timeout", _D.arrival_timeout,
          "s beyond a move's planned duration before 'not reached'", low=0.0, high=60.0,
          low_open=True, applies=NEXT_RUN),
    Param("dwell", _D.dwell, "s, longest wait for a static sample at a pose (Gaz & De Luca 2017: 1 s)", low=0.0,
          high=30.0, low_open=True, applies=NEXT_RUN),
    Param("pick_rest_timeout", _D.pick_rest_timeout,
          "s, longest wait for rest at the pick configuration (after the grasp)",
          low=0.0, high=60.0, low_open=True, applies=NEXT_RUN),
    Param("capture_period", _D.capture_period,
          "s, shortest time between two capture requests at a pose", low=0.0, high=1.0,
          applies=NEXT_RUN),
    Param("monitor_fit_delay", _D.monitor_fit_delay,
          "s after ~/active before the first move (the monitor fits its provisional "
          "payload after 0.05 s at rest)", low=0.0, high=10.0, applies=NEXT_RUN),
    Param("service_timeout", _D.service_timeout, "s (wall clock) the estimator may take to answer", low=0.0, high=60.0,
          low_open=True, applies=NEXT_RUN),
    Param("collision_clear_timeout", _D.collision_clear_timeout,
          "s the first move waits for the monitor's grasp detection to clear",
          low=0.0, high=60.0, low_open=True, applies=NEXT_RUN),
    Param("require_monitor", _D.require_monitor, "move only while the collision monitor reports that it is monitoring "
          "(collision_monitor/status below ERROR, newer than 3 s); false: sample without collision detection",
          applies=NEXT_RUN),
    Param("sweep_poses", _D.sweep_poses,
          "~/sweep: static poses of the unloaded arm for its gravity model", low=8, high=200,
          applies="next ~/sweep"),
    Param("sweep_amplitude_deg", _D.sweep_amplitude_deg,
          "~/sweep: deg per joint around the current configuration (the workspace "
          "the sweep may use: keep it free of obstacles)", low=0.0, high=30.0, low_open=True, applies="next ~/sweep"),
    Param("sweep_velocity_scale", _D.sweep_velocity_scale,
          "~/sweep: peak joint speed of a move as a fraction of the velocity limit",
          low=0.0, high=1.0, low_open=True, applies="next ~/sweep"),
    Param("mode", _D.mode, "static: the ±amplitude_deg static poses (mass and CoM, about 6 s); dynamic: one "
          "excitation within the same envelope (mass, CoM and inertia, about 2.5 s; docs/bench/dynamic.md), "
          "differential against the ~/record_reference run when there is one at this pick configuration, else "
          "one-shot against the model (coarse, flagged); auto: dynamic when ~/record_reference was recorded at "
          "this pick configuration, else static", choices=("auto", "static", "dynamic"), applies=NEXT_RUN),
    Param("excitation_duration", _D.excitation_duration,
          "s, planned duration of the dynamic excitation (one Fourier period, rest to "
          "rest at the pick configuration)", low=0.5, high=20.0, applies="next ~/record_reference"),
    Param("excitation_harmonics", _D.excitation_harmonics,
          "harmonics of the excitation (more: faster content within the same ±amplitude)",
          low=2, high=10, applies="next ~/record_reference"),
    Param("excitation_velocity_scale", _D.excitation_velocity_scale,
          "peak joint speed of the excitation as a fraction of the velocity limit",
          low=0.0, high=1.0, low_open=True, applies="next ~/record_reference"),
    Param("excitation_max_acceleration", _D.excitation_max_acceleration,
          "rad/s^2 per joint, acceleration budget of the excitation (robot "
          "descriptions carry no acceleration limits: set it to what your controller allows)", low=0.0, high=50.0,
          low_open=True, applies="next ~/record_reference"),
    Param("monitor_timeout", _D.monitor_timeout,
          "s (wall clock) ~/sample waits for the collision monitor to be monitoring "
          "before it refuses", low=0.0, high=120.0, low_open=True, applies=NEXT_RUN),
])


def sampler_config(values: dict) -> SamplerConfig:
    """The core's settings (:class:`sampling.sampler.SamplerConfig`) from this node's parameter values."""
    return SamplerConfig(**{f.name: type(getattr(_D, f.name))(values[f.name]) for f in fields(SamplerConfig)})


def change_note(names: set[str]) -> str:
    """The log line for changed parameters ``names``: when each applies (a row's ``applies``)."""
    when: dict[str, list[str]] = {}
    for name in sorted(names):
        p = PARAMS.by_name.get(name)
        when.setdefault("at once" if p is None or p.applies == "immediately" else f"from the {p.applies}",
                        []).append(name)
    return "parameters changed: " + "; ".join(f"{', '.join(n)} (applies {w})" for w, n in when.items())


__all__ = ["PARAMS", "NEXT_RUN", "sampler_config", "change_note"]
