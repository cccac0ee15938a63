"""`payload-estimation report`: the demo's tables and plots from a recording of your own robot.

Input: a rosbag2 directory (mcap or sqlite3, with or without metadata.yaml) or a lone .db3/.mcap
file with sensor_msgs/JointState (effort = measured joint torque), or a CSV (t, q*, dq*, tau*);
repeated rows are dropped and the sampling (rate, jitter, gaps) is reported. The rests of the arm
become static captures; they give the payload estimate (one-shot against the robot model, or
differential with ``--unloaded``). The momentum-observer residual is then computed over the whole
recording with and without the payload estimate, and the measured torques are compared with the
model on the moving parts.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from .command_line import CommandError
from .recording_input import add_rate_argument, add_torque_gain_argument, load_samples
from .robot_option import add_robot_arguments, robot_from_args

HELP = "tables and plots (estimate, residual with/without payload, torque fit) from a recorded run"


def add_arguments(p) -> None:
    add_robot_arguments(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bag", help="rosbag2 directory or .db3/.mcap file with sensor_msgs/JointState")
    src.add_argument("--data", help="recording: CSV (t, q1.., dq1.., tau1..) or rosbag2 directory / .db3 / .mcap")
    p.add_argument("--topic", default="joint_states", help="JointState topic in the bag (default joint_states)")
    add_torque_gain_argument(p)
    add_rate_argument(p)
    p.add_argument("--unloaded", help="recording (bag dir or CSV) of the unloaded arm at the same rests: "
                   "differential estimate")
    p.add_argument("--payload", help="skip the estimate and use m,cx,cy,cz (kg, m, payload frame)")
    p.add_argument("--threshold", type=float, default=6.0, help="residual threshold, N m (default 6)")
    p.add_argument("--gain", type=float, default=25.0, help="observer gain K_I, 1/s (default 25)")
    p.add_argument("--out", default="report", help="output directory (plots, summary.json)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")


def _load(path: str, args, desc, notes: list[str], stamps: str = "required"):
    """Samples of a recording (:func:`.recording_input.load_samples`: torque gain, sign refused); what loading
    found goes to ``notes``."""
    out = io.StringIO()
    samples = load_samples(path, desc, args, out=out, stamps=stamps)
    notes += out.getvalue().splitlines()
    return samples


def run(args) -> int:
    from ..collision import CollisionDetector, MomentumObserver
    from ..model import RigidBodyDynamics
    from ..payload import PayloadEstimate, estimate_payload_gravity
    from ..reporting import format_table, plot_residuals, plot_torques, validation_torques
    from ..signals import match_captures, static_captures

    desc = robot_from_args(args)
    notes: list[str] = []
    run_data = _load(args.bag or args.data, args, desc, notes)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dyn = RigidBodyDynamics(desc)
    captures = static_captures(run_data)
    rows = [("samples", run_data.n_samples, f"{run_data.t[-1] - run_data.t[0]:.1f} s"),
            ("static rests found", len(captures), "")]
    est = None
    if args.payload:
        m, *c = (float(x) for x in args.payload.split(","))
        est = PayloadEstimate(m, np.array(c), frame=desc.payload_frame_name, method="given")
    elif captures:
        q = np.array([c.q for c in captures])
        tau = np.array([c.tau for c in captures])
        tau0 = None
        if args.unloaded:
            pairs = match_captures(captures, static_captures(_load(args.unloaded, args, desc, notes, "captures")))
            if not pairs:
                raise CommandError("no rest of --unloaded matches a rest of the loaded recording (within 0.2°)")
            q = np.array([a.q for a, _ in pairs])
            tau = np.array([a.tau for a, _ in pairs])
            tau0 = np.array([b.tau for _, b in pairs])
        est = estimate_payload_gravity(dyn, q, tau, tau0)
    if est is not None:
        rows += [("payload mass [kg]", f"{est.mass:.4f}", f"σ {est.std.get('mass', float('nan')):.4f} ({est.method})"),
                 ("payload CoM [mm]", np.array2string(1e3 * est.com, precision=1), est.frame)]
    else:
        rows.append(("payload", "not estimated", "no static rest in the recording"))

    t, q, tau = run_data.t, run_data.q, run_data.tau
    dq = run_data.dq if run_data.dq is not None else np.gradient(q, t, axis=0)
    panels, summary_res = [], {}
    for label, payload in (("with the payload estimate", est), ("without payload", None)):
        if label.startswith("with the") and est is None:
            continue
        obs = MomentumObserver(dyn, args.gain)
        # a gravity-only estimate enters M and C as a point mass too (as the collision_monitor node does)
        obs.set_payload(None if payload is None else payload.as_point_mass().body())
        det = CollisionDetector(desc.n, args.threshold)
        r = np.array([obs.update(*s) for s in zip(t, q, dq, tau)])
        for tk, rk in zip(t, r):
            det.update(tk, rk)
        events = det.events + ([det.current] if det.in_collision else [])
        panels.append((f"{desc.name}: residual {label}", t - t[0], r))
        summary_res[label] = {"events": [e.to_dict() for e in events], "max_abs_residual": float(np.abs(r).max())}
        rows.append((f"collision events ({label})", len(events), f"max |r| {np.abs(r).max():.2f} N m"))
    f6 = plot_residuals(out / "residuals.png", panels, desc.joint_names, args.threshold)
    plots = [str(f6)]
    moving = ~np.zeros(t.size, bool)
    for c in captures:
        moving &= ~((t >= c.t_start) & (t <= c.t_end))
    if moving.sum() > 50:
        vt = validation_torques(desc, None if est is None else est.body(), t, q, tau)
        mask = np.interp(vt.t, t, moving.astype(float)) > 0.5
        if est is None:  # no estimate: one model curve, named for what it is
            f5 = plot_torques(out / "torques.png", vt.t - vt.t[0], vt.measured, vt.predicted, desc.joint_names,
                              f"{desc.name}: measured vs model torques (moving parts)",
                              predicted_label="model (no payload)", mask=mask)
        else:
            f5 = plot_torques(out / "torques.png", vt.t - vt.t[0], vt.measured, vt.predicted, desc.joint_names,
                              f"{desc.name}: measured vs model torques (moving parts)", tau_unloaded=vt.unloaded,
                              mask=mask)
        plots.append(str(f5))
        rms = np.sqrt(np.mean((vt.measured[mask] - vt.predicted[mask]) ** 2, axis=0))
        rows.append(("torque RMS error, moving [N m]", f"{np.sqrt(np.mean(rms ** 2)):.3f}",
                     " ".join(f"{x:.2f}" for x in rms)))
    summary = {"robot": desc.name, "recording": notes, "samples": run_data.n_samples, "static_rests": len(captures),
               "estimate": None if est is None else est.to_dict(), "residual": summary_res, "plots": plots}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    if args.json:
        print(json.dumps(summary, indent=2, default=float))
    else:
        print("\n".join(notes))
        print(format_table(("quantity", "value", "note"), rows))
        print("\nplots: " + "\n       ".join(plots) + f"\nsummary: {out / 'summary.json'}")
    return 0
