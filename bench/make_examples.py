"""Generate examples/lwr4_{loaded,unloaded}_samples.csv with the MuJoCo simulated arm.

The simulated LWR 4+ (payload_estimation.sim, a MuJoCo model of the *true* robot, whose links
differ from the nominal description by ``MODEL_ERROR``) visits the 10 static +-7 deg poses of
payload_estimation.sampling.plan_poses around the pick configuration, waits ``SETTLE`` s at each
(paper 000 Sec. VI-A waits 1 s) and records one JointState-like sample (t, q, dq, measured
torque). The torque sensor has white noise ``NOISE`` N m at 1 kHz through a 10 Hz first-order
low-pass (as the lbr_fri_ros2_stack driver) and constant offsets ``OFFSET`` N m.
Run:  .venv/bin/python bench/make_examples.py
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from payload_estimation.files import write_samples_csv
from payload_estimation.model import BodyInertia, RigidBodyDynamics, load_robot
from payload_estimation.sampling import plan_poses
from payload_estimation.signals import Samples
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm, true_links

OUT = Path(__file__).resolve().parents[1] / "examples"
PICK_DEG = (0.0, 30.0, 0.0, -60.0, 0.0, 60.0, 0.0)
TRUTH = BodyInertia(3.0, np.array([0.01, -0.005, 0.12]), np.diag([0.015, 0.016, 0.004]))
MODEL_ERROR = 0.05
NOISE = 0.5
OFFSET = (0.3, -0.5, 0.2, 0.4, -0.2, 0.1, 0.05)
SETTLE = 1.0
SEED = 3


def record(arm: SimulatedArm, poses: np.ndarray, durations: np.ndarray) -> Samples:
    """Visit ``poses``, settle, and take one sample at each (times in s since the first pose)."""
    rows = []
    steps = int(round(SETTLE / arm.dt))
    for pose, dur in zip(poses, durations):
        if dur > 0:
            arm.set_trajectory([(float(dur), pose, None)])
            arm.step(int(round(dur / arm.dt)))
        arm.step(steps)
        rows.append(arm.state())
    t0 = rows[0].t
    return Samples(np.array([r.q for r in rows]), np.array([r.tau for r in rows]),
                   dq=np.array([r.dq for r in rows]), t=np.array([r.t - t0 for r in rows]))


def main() -> None:
    desc = load_robot("lwr4")
    dyn = RigidBodyDynamics(desc)
    q0 = np.deg2rad(PICK_DEG)
    plan = plan_poses(dyn, q0)
    # One true robot (links off by MODEL_ERROR) for both runs; independent sensor noise per run.
    links = true_links(desc, MODEL_ERROR, SEED)
    cfg = SimConfig(seed=SEED, true_links=links,
                    sensor=SensorConfig(noise_std=NOISE, offset=OFFSET, lowpass_hz=10.0))
    OUT.mkdir(exist_ok=True)
    out = {}
    for name, payload in (("unloaded", None), ("loaded", TRUTH)):
        arm = SimulatedArm(desc, replace(cfg, seed=SEED + 100 * (payload is not None)))
        if payload is not None:
            arm.attach_payload(payload)
        arm.reset(q0)
        s = record(arm, plan.poses, plan.durations[:-1])
        s = replace(s, joint_names=desc.joint_names)
        write_samples_csv(s, OUT / f"lwr4_{name}_samples.csv", precision=9)
        out[name] = s
    truth = {"mass": TRUTH.mass, "com": TRUTH.com.tolist(), "inertia_com_diag": [0.015, 0.016, 0.004],
             "model_error": MODEL_ERROR, "noise_std": NOISE, "offset": list(OFFSET), "settle_s": SETTLE}
    (OUT / "lwr4_truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    gap = np.abs(out["loaded"].q - out["unloaded"].q).max()
    print(f"wrote {OUT}/lwr4_loaded_samples.csv, lwr4_unloaded_samples.csv; max pose gap {gap:.2e} rad")


if __name__ == "__main__":
    main()
