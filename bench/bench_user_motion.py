"""The online estimate on the motions users command, the rest after them included (issue 46).

Per robot (iiwa14, lwr4), trajectory style and move, on bench/bench_online.py's arm (MuJoCo, 3 % model error,
sensor offsets uniform in ±0.5 N m per joint, 0.1 N m torque noise, 1 kHz) with its estimators (the nominal one,
declared 3 % and 0.5 N m; the one on a calibration sweep's gravity model, 30 poses within ±25 deg of the pick
configuration; both anchored on the unloaded rest before the grasp) and its cases (a random pick configuration, a
0.5-5 kg box, the offsets: ``bench_online.make_case`` with the move's seed):

- the arm at rest unloaded 0.6 s, the box attached and the grasp announced, ``PICK`` s at rest (the gripper, the
  lift), then the move, then ``REST`` s at rest at the move's end (a new static orientation);
- the move, from the pick configuration: 25-55 deg per joint (random sign) in 2-3 s, written as a user's program
  or a planner writes it (:mod:`payload_estimation.sim.styles`: *positions* only; *positions+velocities*;
  *positions+velocities+accelerations*; *time-parameterised* like MoveIt's time-optimal parameterisation, its own
  duration; *stop-and-go*, positions only with two 0.3 s stops) and executed as joint_trajectory_controller
  executes it (``set_trajectory(points, "jtc")``); *far*: 60-90 deg per joint (as far as the limits allow), with
  positions, velocities and accelerations, ending far outside the calibration sweep's ±25 deg envelope;
- the calibrated estimator runs inside the estimator node's :class:`.payload.online_session.OnlineSession` (fed
  every sample, ticked every 0.05 s as the node's 20 Hz timer: ``ONLINE_PERIOD`` of ros/estimator_node.py), whose
  published estimates (and their gravity uncertainty, sent first) the monitor node's core carries
  (:class:`.collision.supervisor.MonitorSupervisor`, node defaults: 6 N m; the grasp announced at the attach, its
  window and the provisional payload learnt at rest until the first estimate; thresholds widened by 3σ of the
  estimate's gravity torque); the nominal estimator beside it on the same samples;
- the noise-only ceiling of the same move (docs/bench/online_ceiling.md's last row): the same move on an arm that is
  exactly its description without offsets, an estimator declared exact with the payload's inertia known, until 1.0 s.

Figures (per robot, style and estimator): mass and every CoM component within 3σ of the σ reported at that instant,
1.0 s into the move, at its end and after the rest; at the end of the rest within 0.5 % / 3 mm among moves whose two
rests differ by ≥ 20 deg in the tool's tilt (the angle between the vertical in the payload frame at the two rests);
at 1.0 s within 1 % / 5 mm against the ceiling's on the same moves; the state at the end of the rest; the misfit
flag; estimates published per second while the arm moves (the session: from the move's start to its end, and per
tick from the first publish, which waits for a joint to have moved 2 deg); false alarms (the monitor's detections:
nothing touches the arm).

Usage: .venv/bin/python bench/bench_user_motion.py [--robots iiwa14 lwr4] [--styles ...] [--moves 100]
       [--workers 2] [--save F.pkl] [--write]
       .venv/bin/python bench/bench_user_motion.py --report F.pkl [G.pkl ...] [--write]
  --write -> docs/bench/user_motion.md; --save: the moves so far after every move (a long run stopped early still
  reports what it did).
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# --root DIR: another checkout's package, bench_online and session (its figures "before"; before any import of them)
ROOT = Path(sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else Path(__file__).parent.parent).resolve()
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_online as bo  # noqa: E402
import numpy as np  # noqa: E402
from benchlib import machine, write_section  # noqa: E402

from payload_estimation.collision.monitor import MonitorConfig  # noqa: E402
from payload_estimation.collision.payload_change import GRASP  # noqa: E402
from payload_estimation.collision.supervisor import MonitorSupervisor  # noqa: E402
from payload_estimation.model.dynamics import RigidBodyDynamics  # noqa: E402
from payload_estimation.model.robot_file import load_robot  # noqa: E402
from payload_estimation.payload.limits import check_payload  # noqa: E402
from payload_estimation.payload.online import CONVERGED, OnlineConfig, OnlinePayloadEstimator  # noqa: E402
from payload_estimation.payload.online_session import OnlineSession  # noqa: E402
from payload_estimation.reporting import format_table  # noqa: E402
from payload_estimation.sim.styles import STYLES, user_trajectory  # noqa: E402

FAR = "far"
ALL_STYLES = (*STYLES, FAR)
PICK = 0.5  # s at rest after the grasp
REST = 1.5  # s at rest after the move
TICK = 0.05  # s, the estimator node's online timer (ros/estimator_node.py ONLINE_PERIOD; 0.1 before 2026-11-29 09:00)
SWEEP_DEG = 25.0  # the calibration sweep's amplitude (bench_online.SWEEP)
TILT_DEG = 20.0  # the two rests' tilt from which the rest's accuracy target applies
ESTS = ("calibrated", "nominal")


def move_target(dyn, rng: np.random.Generator, q0: np.ndarray, far: bool) -> np.ndarray:
    """25-55 deg per joint from ``q0`` (60-90 deg ``far``: each joint as far as its limits allow, 0.1 rad inside)."""
    lim = dyn.desc.limits.position
    lo, hi = (60, 90) if far else (25, 55)
    sign = rng.choice([-1, 1], dyn.n)
    step = np.radians(rng.uniform(lo, hi, dyn.n))
    room = np.where(sign > 0, lim[:, 1] - 0.1 - q0, q0 - (lim[:, 0] + 0.1))
    sign = np.where(room < step, -sign, sign)  # the side with room first
    room = np.where(sign > 0, lim[:, 1] - 0.1 - q0, q0 - (lim[:, 0] + 0.1))
    return q0 + sign * np.clip(step, 0.0, np.maximum(room, 0.0))


def make_move(dyn, robot: str, style: str, i: int):
    """(case, target, points) of move ``i`` (the same case and, but for ``far``, the same target in every style)."""
    rng = np.random.default_rng([46, i, 0 if robot == "iiwa14" else 1])
    case = bo.make_case(dyn, rng, i)
    target = move_target(dyn, rng, case.q0, False)
    duration = float(rng.uniform(2.0, 3.0))
    far = move_target(dyn, np.random.default_rng([46, i, 2]), case.q0, True)
    if style == FAR:
        target, kind = far, "positions+velocities+accelerations"
    else:
        kind = style
    # no faster than 90 % of the velocity limits (the quintic's peak: 1.875 x the mean), as a planner would time it
    vmax = np.asarray(dyn.desc.limits.velocity, float)
    duration = max(duration, float(np.max(1.875 * np.abs(target - case.q0) / (0.9 * vmax))))
    pts = user_trajectory(kind, case.q0, target, duration, velocity_limits=vmax)
    return case, target, pts


def _tilt(dyn, q0, q1) -> float:
    u0, u1 = (dyn.forward_kinematics(q, "payload")[2, :3] for q in (q0, q1))
    return float(np.degrees(np.arccos(np.clip(u0 @ u1, -1.0, 1.0))))


def _record(st, truth: np.ndarray) -> dict:
    e = st.estimate
    if e is None:
        return {"error": np.full(4, np.nan), "std": np.full(4, np.nan), "state": st.state, "misfit": False}
    return {"error": np.array([e.mass, *e.com]) - truth, "std": np.array([e.std[k] for k in bo.KEYS]),
            "state": st.state, "misfit": bool(st.misfit), "chi2": float(st.misfit_ratio)}


def run_move(robot: str, style: str, i: int, tick: float = TICK) -> dict:
    """One move (module docstring): records per estimator at "early" (1.0 s), "end", "rest"; the ceiling's "early";
    the session's publishes; the monitor's detections."""
    dyn = RigidBodyDynamics(load_robot(robot))
    case, target, pts = make_move(dyn, robot, style, i)
    t0 = time.perf_counter()
    model = bo.calibrate(dyn, case)
    arm = bo.make_arm(dyn, case)
    cfg = OnlineConfig(model_uncertainty=bo.MODEL_ERROR, torque_noise=bo.NOISE, torque_offset_std=bo.OFFSET)
    session = OnlineSession(config=cfg)
    session.use(dyn, model, cfg)
    nominal = OnlinePayloadEstimator(dyn, cfg)
    sup = MonitorSupervisor(dyn, MonitorConfig(contact=None, thresholds=bo.BASE_THRESHOLD),
                            frame=dyn.desc.payload_frame_name, limit_check=check_payload)
    truth = np.array([case.body.mass, *case.body.com])
    duration = float(pts[-1][0])
    k_grasp = round(bo.T_GRASP * 1000)
    k_move = k_grasp + round(PICK * 1000)
    k_early, k_end = k_move + round(min(bo.AFTER, duration) * 1000), k_move + round(duration * 1000)
    k_rest = k_end + round(REST * 1000)
    tick_every = round(tick * 1000)
    out = {"robot": robot, "style": style, "i": i, "mass": case.body.mass, "duration": duration,
           "tilt": _tilt(dyn, case.q0, target),
           "beyond_sweep_deg": float(np.degrees(np.max(np.abs(target - case.q0)))) - SWEEP_DEG,
           **{name: {} for name in ESTS}}
    ticks_moving = published_moving = 0
    first_publish = None
    false_alarms, carried, alarms = 0, False, []
    for k in range(k_rest + 1):
        if k == k_grasp:
            arm.attach_payload(case.body)
            session.grasped()
            nominal.grasped()
            sup.announce(GRASP)
        if k == k_move:
            arm.set_trajectory(pts, "jtc")
        arm.step(1)
        s = arm.state()
        session.add_sample(s.t, s.q, s.dq, s.tau)
        nominal.update(s.t, s.q, s.dq, s.tau)
        if k % tick_every == 0:
            tick = session.tick()
            if k_move < k <= k_end:
                ticks_moving += 1
                if tick.estimate is not None:
                    published_moving += 1
                    first_publish = k if first_publish is None else first_publish
            if tick.uncertainty is not None:  # the monitor node's core takes them as the node sends them
                u = tick.uncertainty
                sup.uncertainty(u["mass"], u["com"], np.asarray(u["gravity_covariance"]))
            if tick.estimate is not None:
                sup.estimate(tick.estimate, dyn.desc.payload_frame_name)
                carried = True
        step = sup.update(s.t, s.q, s.dq, s.tau).monitor
        if step.event is not None and step.event.active:
            false_alarms += 1
            alarms.append(((k - k_move) / 1000, carried, float(np.max(np.abs(step.residual)))))
        if k in (k_early, k_end, k_rest):
            when = {k_early: "early", k_end: "end", k_rest: "rest"}[k]
            out["calibrated"][when] = _record(session.estimator.solve(), truth)
            out["nominal"][when] = _record(nominal.solve(), truth)
    out["rate"] = published_moving / duration  # per second of move
    out["per_tick"] = (published_moving / max(1, (k_end - first_publish) // tick_every + 1)
                       if first_publish is not None else 0.0)
    out["first_publish_s"] = (first_publish - k_move) / 1000 if first_publish is not None else None
    if hasattr(session, "published_rest"):  # the session's count (a checkout before issue 46's rest: none)
        out["published_rest"] = session.published_rest
    out["false_alarms"] = false_alarms
    out["alarms"] = alarms  # (s after the move's start, an estimate carried, max |r| N m)
    out["tick"] = tick
    out["monitor"] = "supervisor"  # the monitor node's core (earlier runs: a bare monitor without the provisional)
    out["ceiling"] = ceiling(dyn, case, pts, truth)
    out["seconds"] = time.perf_counter() - t0
    return out


def ceiling(dyn, case, pts, truth: np.ndarray) -> dict:
    """The move on an exact arm without offsets, an estimator declared exact with the payload's inertia known
    (bench_online.KnownInertia): its record 1.0 s into the move."""
    exact = replace(case, offsets=np.zeros_like(case.offsets))
    arm = bo.make_arm(dyn, exact, 0.0)
    est = bo.KnownInertia(dyn, OnlineConfig(model_uncertainty=0.0, torque_noise=bo.NOISE, torque_offset_std=0.0),
                          case.body.inertia_com)
    k_grasp = round(bo.T_GRASP * 1000)
    k_move = k_grasp + round(PICK * 1000)
    k_early = k_move + round(min(bo.AFTER, float(pts[-1][0])) * 1000)
    for k in range(k_early + 1):
        if k == k_grasp:
            arm.attach_payload(case.body)
            est.grasped()
        if k == k_move:
            arm.set_trajectory(pts, "jtc")
        arm.step(1)
        s = arm.state()
        est.update(s.t, s.q, s.dq, s.tau)
    return _record(est.solve(), truth)


# ---------------------------------------------------------------------------------------------------------- report
def _covered(rs, name, when) -> float:
    return float(np.mean([np.all(np.abs(r[name][when]["error"]) <= 3 * r[name][when]["std"]) for r in rs]))


def _within(rs, name, when, rel, mm) -> float:
    ok = [abs(r[name][when]["error"][0]) <= rel * r["mass"] and np.linalg.norm(r[name][when]["error"][1:]) <= mm / 1e3
          for r in rs]
    return float(np.mean(ok)) if ok else float("nan")


def _ceiling_within(rs) -> float:
    return float(np.mean([abs(r["ceiling"]["error"][0]) <= 0.01 * r["mass"]
                          and np.linalg.norm(r["ceiling"]["error"][1:]) <= 5e-3 for r in rs]))


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{100 * x:.0f} %"


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(results: list[dict], command: str) -> str:
    rows, targets = [], []
    robots = [r for r in ("iiwa14", "lwr4") if any(x["robot"] == r for x in results)]
    for robot in robots:
        for style in ALL_STYLES:
            rs = [r for r in results if r["robot"] == robot and r["style"] == style]
            if not rs:
                continue
            tilted = [r for r in rs if r["tilt"] >= TILT_DEG]
            rate = np.median([r["rate"] for r in rs])
            per_tick = np.mean([r["per_tick"] for r in rs])
            first = np.median([r["first_publish_s"] for r in rs if r["first_publish_s"] is not None])
            watched = [r for r in rs if r.get("monitor") == "supervisor"]
            alarms = sum(r["false_alarms"] for r in watched)
            ceil = _ceiling_within(rs)
            for name in ESTS:
                cov = [_covered(rs, name, w) for w in ("early", "end", "rest")]
                early = _within(rs, name, "early", 0.01, 5)
                rest_acc = _within(tilted, name, "rest", 0.005, 3)
                conv = np.mean([r[name]["rest"]["state"] == CONVERGED for r in rs])
                misfit = np.mean([r[name]["end"]["misfit"] for r in rs])
                rows.append((robot if name == "calibrated" else "", style if name == "calibrated" else "", name,
                             len(rs), " / ".join(_pct(c) for c in cov), f"{_pct(rest_acc)} (of {len(tilted)})",
                             f"{_pct(early)} / {_pct(ceil)}", _pct(conv), _pct(misfit),
                             f"{rate:.1f}; {100 * per_tick:.0f} %; {first:.2f} s" if name == "calibrated" else "",
                             f"{alarms} in {len(watched)}" if name == "calibrated" else ""))
                label = f"{robot} {style} {name}"
                for when, c in zip(("1.0 s", "end", "after the rest"), cov):
                    targets.append((label, f"within 3σ {when}", _pct(c), _verdict(c >= 0.95)))
                if name == "calibrated":
                    targets.append((label, "rest: 0.5 % / 3 mm (tilt ≥ 20 deg)", f"{_pct(rest_acc)} of {len(tilted)}",
                                    _verdict(len(tilted) > 0 and rest_acc >= 0.95)))
                    targets.append((label, "1.0 s: 1 % / 5 mm within 5 points of the ceiling",
                                    f"{_pct(early)} vs {_pct(ceil)}", _verdict(early >= ceil - 0.05)))
                    targets.append((label, "updates per second while moving ≥ 10", f"{rate:.1f}",
                                    _verdict(rate >= 10)))
                    targets.append((label, "false alarms 0", f"{alarms} in {len(watched)} moves",
                                    _verdict(alarms == 0 and len(watched) > 0)))
    table = format_table(("robot", "style", "estimator", "moves", "within 3σ: 1.0 s / end / rest",
                          "rest: 0.5 % / 3 mm, tilt ≥ 20°", "1.0 s: 1 % / 5 mm / ceiling", "converged after rest",
                          "misfit flagged at end", "updates/s moving; ticks from 1st; 1st after", "false alarms"),
                         rows, "lllrllllllr", pad=False)
    target_table = format_table(("case", "target", "measured", "verdict"), targets, "llrl", pad=False)
    missed = [t for t in targets if t[3] != "met"]
    counts = {(r["robot"], r["style"]) for r in results}
    n_moves = sorted({sum(1 for r in results if (r["robot"], r["style"]) == c) for c in counts})
    cost = np.median([r["seconds"] for r in results])
    return f"""# The online estimate on the motions users command (issue 46)

{datetime.date.today().isoformat()}, {machine()}. `{command}` (module docstring: set-up); {'/'.join(map(str, n_moves))}
move(s) per robot and style (the documented command is `--moves 100`), median {cost:.1f} s of computing per move.

Per robot and style: the calibrated estimator (inside the node's OnlineSession) and the nominal one. "within 3σ": moves
whose mass and every CoM component are within 3σ of the σ reported at that instant, 1.0 s into the move, at its end,
after {REST} s of rest; "rest": within 0.5 % / 3 mm at the end of the rest among the moves whose two rests differ by
≥ {TILT_DEG:g} deg in the tool's tilt (their number in brackets); "1.0 s": within 1 % / 5 mm 1.0 s into the move, and
the noise-only ceiling's on the same moves (exact arm, no offsets, the inertia known); "converged" the state after
the rest; "misfit flagged" at the end of the move; updates: estimates the session published per second of move
(median), the share of ticks that published from the first publish to the move's end, the median delay of the first
publish after the move's start (it waits for a joint to have moved 2 deg); false alarms: collision-monitor detections
(nothing touches the arm), summed over the moves run with the monitor node's core (``monitor`` in the saved runs).

{table}

Targets (issue 46; accuracy on the calibrated estimator, σ coverage on both):

{target_table}

Not met: {len(missed)} of {len(targets)}.

False alarms (s after the move's start): {alarm_words(results)}.
"""


def compare(before: list[dict], after: list[dict]) -> str:
    """Before (another checkout's runs, ``--root``) and after on the same moves: per robot, style and estimator the
    median and largest 3σ of a CoM component and CoM error at the end of the move and after the rest, the share
    converged after the rest, estimates per second of move and published at rest."""
    key = {(r["robot"], r["style"], r["i"]): r for r in after}
    rows = []
    for robot in ("iiwa14", "lwr4"):
        for style in ALL_STYLES:
            pairs = [(b, key[(b["robot"], b["style"], b["i"])]) for b in before
                     if b["robot"] == robot and b["style"] == style and (robot, style, b["i"]) in key]
            if not pairs:
                continue
            for name in ESTS:
                cells = []
                for when in ("end", "rest"):
                    s3 = [[3e3 * np.max(x[name][when]["std"][1:]) for x in pair] for pair in pairs]
                    err = [[1e3 * np.linalg.norm(x[name][when]["error"][1:]) for x in pair] for pair in pairs]
                    s3, err = np.array(s3), np.array(err)
                    cells.append(f"{np.median(s3[:, 0]):.1f} ({s3[:, 0].max():.1f}) -> {np.median(s3[:, 1]):.1f} "
                                 f"({s3[:, 1].max():.1f}); {np.median(err[:, 0]):.1f} -> {np.median(err[:, 1]):.1f}")
                conv = [np.mean([x[name]["rest"]["state"] == CONVERGED for x in col]) for col in zip(*pairs)]
                rate = [np.median([x["rate"] for x in col]) for col in zip(*pairs)]
                # the session's own count (None: a checkout whose session does not count them; not measured)
                rest = [np.mean([x["published_rest"] for x in col]) if all("published_rest" in x for x in col)
                        else None for col in zip(*pairs)]
                rows.append((robot, style, name, len(pairs), *cells, f"{_pct(conv[0])} -> {_pct(conv[1])}",
                             f"{rate[0]:.1f} -> {rate[1]:.1f}; " + " -> ".join("-" if x is None else f"{x:.1f}"
                                                                              for x in rest)
                             if name == "calibrated" else ""))
    return format_table(("robot", "style", "estimator", "moves", "end: 3σ CoM median (max); error, mm",
                         "after the rest: 3σ CoM median (max); error, mm", "converged after rest",
                         "updates/s moving; published at rest"), rows, "lllrllll", pad=False)


# ---------------------------------------------------------------------------------------------------------- main
def _job(args):
    return run_move(*args)


def alarm_words(results: list[dict]) -> str:
    """Where the false alarms happened: per robot and style, s after the move's start."""
    parts = []
    for robot in ("iiwa14", "lwr4"):
        for style in ALL_STYLES:
            rs = [r for r in results if r["robot"] == robot and r["style"] == style and r.get("monitor")]
            a = [x for r in rs for x in r["alarms"]]
            if a:
                moves = sum(1 for r in rs if r["false_alarms"])
                parts.append(f"{robot} {style}: {len(a)} in {moves} move(s), at "
                             + ", ".join(f"{t:.2f} s" for t, _, _ in a[:8]) + (" ..." if len(a) > 8 else "")
                             + f" (|r| {min(x[2] for x in a):.1f}-{max(x[2] for x in a):.1f} N m)")
    return "; ".join(parts) if parts else "none"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--robots", nargs="+", default=["iiwa14", "lwr4"])
    ap.add_argument("--styles", nargs="+", default=list(ALL_STYLES))
    ap.add_argument("--moves", type=int, default=100)
    ap.add_argument("--first", type=int, default=0, help="the first move's index (to continue a run)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tick", type=float, default=TICK, help="s between the session's ticks (the node's timer)")
    ap.add_argument("--save", type=Path)
    ap.add_argument("--report", nargs="+", type=Path)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--command", default="")
    ap.add_argument("--root", help="another checkout (its package, bench_online and session): figures before")
    ap.add_argument("--note", default="", help="a paragraph appended to the report (the reading)")
    ap.add_argument("--before", nargs="+", type=Path, help="runs of another checkout (--root) to compare with")
    ap.add_argument("--before-command", default="", help="the command that made them (for the report)")
    a = ap.parse_args()
    if a.workers > 2:
        ap.error("--workers: at most 2 (the machine's 2 cores are shared)")
    unknown = set(a.styles) - set(ALL_STYLES)
    if unknown:
        ap.error(f"--styles: unknown {sorted(unknown)}; one of {', '.join(ALL_STYLES)}")
    command = a.command or ".venv/bin/python bench/bench_user_motion.py " + " ".join(sys.argv[1:])
    if a.report:
        results = [r for f in a.report for r in pickle.loads(f.read_bytes())]
    else:
        jobs = [(robot, style, i, a.tick) for i in range(a.first, a.first + a.moves) for robot in a.robots
                for style in a.styles]
        results = []
        with multiprocessing.get_context("fork").Pool(a.workers) as pool:
            for r in pool.imap_unordered(_job, jobs):
                results.append(r)
                c = r["calibrated"]
                print(f"{r['robot']} {r['style']} {r['i']}: tilt {r['tilt']:.0f} deg, rest CoM err "
                      f"{1e3 * np.linalg.norm(c['rest']['error'][1:]):.1f} mm ({c['rest']['state']}), "
                      f"{r['rate']:.1f}/s, {r['false_alarms']} alarms, {r['seconds']:.1f} s", flush=True)
                if a.save is not None:
                    a.save.write_bytes(pickle.dumps(results))
    text = report(results, command)
    if a.before:
        before = [r for f in a.before for r in pickle.loads(f.read_bytes())]
        text += ("\nBefore and after the rest's own misfit check and the session's rules (this change), the same "
                 f"moves: before = `{a.before_command}` (another checkout, `--root`), after = the runs above. 3σ CoM: "
                 "the largest CoM component's; error: the CoM's distance to the truth:\n\n"
                 + compare(before, results) + "\n")
    text += f"\n{a.note}\n" if a.note else ""
    print(text)
    if a.write:
        print(write_section("user_motion", text))


if __name__ == "__main__":
    main()
