"""The simulated arm's torque against the inverse dynamics of its own recorded motion, per trajectory style (issue 46).

Per robot and style (:mod:`payload_estimation.sim.styles`: one 2.5 s move of 25-55 deg per joint, points every 0.1 s;
MoveIt-like: its own duration): the MuJoCo arm with the model exact (``model_error`` 0), noise off, a 3 kg payload
attached; pinocchio's inverse dynamics (true links + payload) of the recorded q, dq and the central difference of
the recorded dq, against the recorded torque: RMS and max per joint (N m), at the physics rate (1 kHz, what
sim_node publishes by default) and decimated to 500 Hz (point samples, as sim_node with ``rate_hz`` 500), and the
miss averaged over 20 ms; at 1 kHz also with dq and ddq from central differences of the recorded q.

``--root DIR`` runs another checkout's simulator (e.g. a worktree of the commit before issue 46: its sim_node turned
a message into points the way it then did -- missing velocities 0, accelerations dropped, a first point at 0 s
refused (dropped here so the rest can be measured)).

Usage: .venv/bin/python bench/bench_sim_styles.py [--root DIR] [--robots iiwa14 lwr4]
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(HERE))
    ap.add_argument("--robots", nargs="+", default=["iiwa14", "lwr4"])
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    from payload_estimation.model.dynamics import RigidBodyDynamics
    from payload_estimation.model.parameters import BodyInertia
    from payload_estimation.model.robot_file import load_robot
    from payload_estimation.sim import SimConfig, SimulatedArm

    # the styles of this checkout, also for an older one (the module only builds points)
    spec = importlib.util.spec_from_file_location("payload_estimation.sim._styles_bench",
                                                  HERE / "payload_estimation/sim/styles.py")
    styles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(styles)
    jtc = "interpolation" in inspect.signature(SimulatedArm.set_trajectory).parameters
    q0s = {"iiwa14": np.radians([-10, 35, 5, -75, -10, 55, 15]), "lwr4": np.radians([10, 40, -5, -70, 15, 50, 20])}
    move = np.radians([40, -30, 25, 45, -35, 30, 55])
    payload = BodyInertia(3.0, np.array([0.02, -0.01, 0.08]), np.diag([6e-3, 5e-3, 4e-3]))
    np.set_printoptions(formatter={"float": lambda x: f"{x:.2g}"})
    print(f"root {args.root}: {'JTC interpolation (sim_node)' if jtc else 'the simulator before issue 46'}")
    print("| robot | style | max abs ddq (rad/s²) | 1 kHz, ddq from q: max (N m) | 1 kHz, ddq from dq: RMS per joint "
          "(N m) | max per joint | 20 ms means, RMS | 500 Hz, ddq from dq: max | 20 ms means, RMS |")
    print("|---|---|---:|---:|---|---|---|---|---|")
    for robot in args.robots:
        desc = load_robot(robot)
        q0 = q0s[robot]
        for style in styles.STYLES:
            pts = styles.user_trajectory(style, q0, q0 + move, 2.5, velocity_limits=desc.limits.velocity)
            arm = SimulatedArm(desc, SimConfig(model_error=0.0))
            arm.attach_payload(payload)
            arm.reset(q0)
            arm.step(200)
            if jtc:
                arm.set_trajectory(pts, "jtc")
            else:
                arm.set_trajectory([p[:3] for p in pts if p[0] > 0])
            rec = [arm.state()]
            for _ in range(int(round((max(p[0] for p in pts) + 0.3) / arm.dt))):
                arm.step(1)
                rec.append(arm.state())
            dyn = RigidBodyDynamics(arm.true_description, payload)
            row = [robot, style]
            for every in (1, 2):
                t = np.array([s.t for s in rec])[::every]
                q = np.array([s.q for s in rec])[::every]
                dq = np.array([s.dq for s in rec])[::every]
                tau = np.array([s.tau for s in rec])[::every]
                h = (t[2:] - t[:-2])[:, None] / 2
                ddq = (dq[2:] - dq[:-2]) / (2 * h)
                miss = tau[1:-1] - np.array([dyn.inverse_dynamics(*x) for x in zip(q[1:-1], dq[1:-1], ddq)])
                w = int(round(0.02 / (every * arm.dt)))
                k = (len(miss) // w) * w
                means = np.sqrt((miss[:k].reshape(-1, w, miss.shape[1]).mean(1) ** 2).mean(0))
                if every == 1:
                    ddq_q = (q[2:] - 2 * q[1:-1] + q[:-2]) / h ** 2
                    dq_q = (q[2:] - q[:-2]) / (2 * h)
                    miss_q = tau[1:-1] - np.array([dyn.inverse_dynamics(*x) for x in zip(q[1:-1], dq_q, ddq_q)])
                    row += [f"{np.abs(ddq_q).max():.1f}", f"{np.abs(miss_q).max():.1e}",
                            str(np.sqrt((miss ** 2).mean(0))), str(np.abs(miss).max(0)), str(means)]
                else:
                    row += [str(np.abs(miss).max(0)), str(means)]
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
