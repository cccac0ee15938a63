"""``payload_sampler``'s parameters: the one table of defaults, ranges and docs.

:data:`PARAMS` declares every parameter (docs/ros_interface.md and config/payload_estimation.yaml are generated
from it); :func:`sampling.sampler.run_spec` turns its values into the configuration of a run
(:class:`sampling.sampling_run.RunSpec`), whose defaults apply only where no node is involved (benches, tests).
"""

from __future__ import annotations

from .node_support import ROBOT_PARAMS, SETTLE_PARAMS, STREAM_PARAMS
from .parameters import Param, ParameterTable

NEXT_RUN = "next ~/sample"

PARAMS = ROBOT_PARAMS + STREAM_PARAMS + SETTLE_PARAMS + ParameterTable([
    Param("n_poses", 10, "static samples including the pick configuration (paper: 10)", low=4, high=50,
          applies=NEXT_RUN),
    Param("amplitude_deg", 7.0, "deg, per-joint perturbation around the pick configuration (paper: ±7°)",
          low=0.0, high=10.0, low_open=True, applies=NEXT_RUN),
    Param("limit_margin_deg", 1.0, "deg kept from the joint position limits", low=0.0, high=20.0, applies=NEXT_RUN),
    Param("velocity_scale", 0.9, "peak joint speed of a move as a fraction of the velocity limit (quintic)",
          low=0.0, high=1.0, low_open=True, applies=NEXT_RUN),
    Param("min_duration", 0.25, "s, shortest move", low=0.0, high=10.0, low_open=True, applies=NEXT_RUN),
    Param("arrival_tolerance_deg", 0.5, "deg per joint for 'arrived'", low=0.0, high=5.0, low_open=True,
          applies=NEXT_RUN),
    Param("arrival_timeout", 2.0, "s beyond a move's planned duration before 'not reached'", low=0.0, high=60.0,
          low_open=True, applies=NEXT_RUN),
    Param("dwell", 1.0, "s, longest wait for a static sample at a pose (paper: 1 s)", low=0.0, high=30.0,
          low_open=True, applies=NEXT_RUN),
    Param("pick_rest_timeout", 3.0, "s, longest wait for rest at the pick configuration (after the grasp)",
          low=0.0, high=60.0, low_open=True, applies=NEXT_RUN),
    Param("capture_period", 0.005, "s, shortest time between two capture requests at a pose", low=0.0, high=1.0,
          applies=NEXT_RUN),
    Param("monitor_fit_delay", 0.25, "s after ~/active before the first move (the monitor fits its provisional "
          "payload after 5/K_I)", low=0.0, high=10.0, applies=NEXT_RUN),
    Param("service_timeout", 3.0, "s (wall clock) the estimator may take to answer", low=0.0, high=60.0,
          low_open=True, applies=NEXT_RUN),
    Param("collision_clear_timeout", 1.0, "s the first move waits for the monitor's grasp detection to clear",
          low=0.0, high=60.0, low_open=True, applies=NEXT_RUN),
    Param("require_monitor", True, "move only while the collision monitor reports that it is monitoring "
          "(collision_monitor/status below ERROR, newer than 3 s); false: sample without collision detection",
          applies=NEXT_RUN),
    Param("sweep_poses", 30, "~/sweep: static poses of the unloaded arm for its gravity model", low=8, high=200,
          applies="next ~/sweep"),
    Param("sweep_amplitude_deg", 25.0, "~/sweep: deg per joint around the current configuration (the workspace "
          "the sweep may use: keep it free of obstacles)", low=0.0, high=30.0, low_open=True, applies="next ~/sweep"),
    Param("sweep_velocity_scale", 0.5, "~/sweep: peak joint speed of a move as a fraction of the velocity limit",
          low=0.0, high=1.0, low_open=True, applies="next ~/sweep"),
    Param("mode", "auto", "static: the ±amplitude_deg static poses (mass and CoM, about 6 s); dynamic: one "
          "excitation within the same envelope (mass, CoM and inertia, about 2.5 s; docs/bench/dynamic.md), "
          "differential against the ~/record_reference run when there is one at this pick configuration, else "
          "one-shot against the model (coarse, flagged); auto: dynamic when ~/record_reference was recorded at "
          "this pick configuration, else static", choices=("auto", "static", "dynamic"), applies=NEXT_RUN),
    Param("excitation_duration", 1.6, "s, planned duration of the dynamic excitation (one Fourier period, rest to "
          "rest at the pick configuration)", low=0.5, high=20.0, applies="next ~/record_reference"),
    Param("excitation_harmonics", 5, "harmonics of the excitation (more: faster content within the same ±amplitude)",
          low=2, high=10, applies="next ~/record_reference"),
    Param("excitation_velocity_scale", 0.8, "peak joint speed of the excitation as a fraction of the velocity limit",
          low=0.0, high=1.0, low_open=True, applies="next ~/record_reference"),
    Param("excitation_max_acceleration", 25.0, "rad/s^2 per joint, acceleration budget of the excitation (robot "
          "descriptions carry no acceleration limits: set it to what your controller allows)", low=0.0, high=50.0,
          low_open=True, applies="next ~/record_reference"),
    Param("monitor_timeout", 10.0, "s (wall clock) ~/sample waits for the collision monitor to be monitoring "
          "before it refuses", low=0.0, high=120.0, low_open=True, applies=NEXT_RUN),
])


__all__ = ["PARAMS", "NEXT_RUN"]
