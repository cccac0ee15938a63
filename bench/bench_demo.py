"""The demo missions as a benchmark: static and dynamic estimate accuracy, sample call time, detections; and the
online demo (estimate while moving: accuracy and σ, threshold widening, a push and a drop during the moves).

Runs `payload-estimation demo` and `payload-estimation demo --online` (all nodes as processes over DDS, MuJoCo arm
with torque noise and 3 % model error) for each robot and records their summaries next to paper 000's figures.
Usage: .venv/bin/python bench/bench_demo.py [--robots lwr4 iiwa14]   -> docs/bench/demo.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import machine, write_section

from payload_estimation.reporting import format_table


def result_tables(rows: list[tuple]) -> list[str]:
    """The estimate table (one row per robot and mode) and the move table (contacts, false alarms), with a
    blank line between: rows are (robot, exit code, wall s, summary.json or None)."""
    estimates = []
    for robot, rc, _wall, s in rows:
        if s is None:
            estimates.append([robot, f"demo failed (exit {rc})", "", "", "", "", "", ""])
            continue
        for mode in ("static", "dynamic"):
            m = s[mode]
            trace = ("– (static poses do not determine it)" if mode == "static" else "not determined"
                     if m["trace_error_pct"] is None else f"{m['trace_error_pct']:+.1f} %")
            estimates.append([robot, mode, f"{m['estimate']['mass']:.3f} kg", f"{m['mass_error_pct']:+.2f} %",
                              f"{m['com_error_mm']:.1f} mm", trace,
                              f"{m['sample_call_sim_s']:.2f} s / {m['sample_call_wall_s']:.2f} s",
                              str(m["collisions_during_sampling"])])
    moves = []
    for robot, _rc, wall, s in rows:
        if s is None:
            continue
        on, off = s["with_estimate"], s["without_update"]
        delays = ", ".join(f"{1e3 * d:.0f}" for d in on["delays_s"] if d == d)
        links = "; ".join(f"{c['link']} {c['force_N']:.0f} N → {c.get('estimated', '-')}" for c in s["contacts"])
        moves.append([robot, f"{s['reference_run_sim_s']:.2f} s", f"{on['detected']}/{len(s['contacts'])}",
                      f"{delays} ms", links, str(on["false_alarms"]),
                      f"{off['detected']} / {off['false_alarms']} / {off['time_above_s']:.1f} s", f"{wall:.0f} s"])
    estimate_head = ["robot", "mode", "mass est.", "mass error", "CoM error", "inertia trace error",
                     "sample call (sim / wall)", "collisions while sampling"]
    move_head = ["robot", "reference run (sim)", "contacts detected", "delays", "contact link, force: true → estimated",
                 "false alarms", "without payload update: detected / false alarms / s above threshold",
                 "demo wall time"]
    return [*format_table(estimate_head, estimates, "llrrrrrr", pad=False).splitlines(), "",
            *format_table(move_head, moves, "lrrllrlr", pad=False).splitlines()]


def online_table(rows: list[tuple]) -> list[str]:
    """One row per robot of `demo --online`: rows are (robot, exit code, wall s, online_summary.json or None)."""

    def est(x: dict | None) -> str:
        if x is None:
            return "-"
        return (f"{x['mass_error_pct']:+.2f} % (σ {x['std_mass']:.3f} kg), CoM {x['com_error_norm_mm']:.1f} mm "
                f"(σ {'/'.join(f'{v:.0f}' for v in x['std_com_mm'])} mm)"
                + ("" if x["within_k_sigma"] else ", NOT within 3σ"))

    out = []
    for robot, rc, wall, s in rows:
        if s is None:
            out.append([robot, f"demo --online failed (exit {rc})", "", "", "", "", "", "", ""])
            continue
        c, d, w = s["contact"], s["drop"], s["sigma_scale"]
        push = (f"collision: detected {c['detection_delay_ms']:.0f} ms, flag {c['flag_delay_ms']:.0f} ms"
                if c["flag_delay_ms"] == c["flag_delay_ms"] and not c["taken_for_loss"] else f"NOT a collision: {c}")
        drop = (f"payload lost: detected {d['detection_delay_ms']:.0f} ms, verdict {d['verdict_delay_ms']:.0f} ms, "
                f"{d['lost_mass']:.2f} kg; {d['collision_flags']} collision flags; 0 kg published after "
                f"{d['estimate_zero_after_ms']:.0f} ms" if d["reported_lost"] else "NOT reported lost")
        widen = f"{w['move1'][1]:.3f} / {s['status_scale_max_move1']:.3f}" if w["move1"] else "-"
        out.append([robot, str(s["estimates"]), est(s["at_1s"]), est(s["end_move1"]), widen, est(s["end_move2"]),
                    push, drop, f"{s['false_alarms']}", f"{wall:.0f} s"])
    head = ["robot", "estimates in move 1", "1.0 s into move 1: mass, CoM error", "end of move 1",
            "threshold scale max in move 1 (from σ / node status)", "after the push (end of move 2)",
            "push 40 N on link 4 in move 2", "drop in move 3", "false alarms", "wall time"]
    return format_table(head, out, "lrllrlllrr", pad=False).splitlines()


def _run(robot: str, online: bool) -> tuple:
    """One demo run: (robot, exit code, wall s, its summary or None)."""
    out = Path(tempfile.mkdtemp(prefix=f"demo_{'online_' if online else ''}{robot}_"))
    print(f"[bench_demo] {robot}{' --online' if online else ''} ...", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "payload_estimation.cli", "demo", "--robot", robot, "--out", str(out)]
    proc = subprocess.run(cmd + (["--online"] if online else []), capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-2000:] + proc.stderr[-4000:], file=sys.stderr)
    wall = time.monotonic() - t0
    path = out / ("online_summary.json" if online else "summary.json")
    return robot, proc.returncode, wall, json.loads(path.read_text()) if path.exists() else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["lwr4", "iiwa14"])
    args = ap.parse_args()
    rows = [_run(robot, False) for robot in args.robots]
    online = [_run(robot, True) for robot in args.robots]
    lines = [
        "## Demo mission (pick, static and dynamic ±7° sampling, estimate, move with 3 injected contacts)",
        "",
        f"- machine: {machine()} (at the end)",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `.venv/bin/python bench/bench_demo.py --robots {' '.join(args.robots)}` "
        "(each = `./run demo --robot R`)",
        "- simulated arm: MuJoCo, 0.1 N m torque noise, true link parameters 3 % off the model the nodes use; "
        "payload 3.0 kg, CoM (30, -20, 110) mm in the last link frame, inertia diag (0.012, 0.012, 0.006) kg m²",
        "- the same grasp sampled twice: `mode: static` (10 poses) then `mode: auto` (dynamic, against the "
        "reference run recorded before the grasp); the move uses the dynamic estimate",
        "",
        *result_tables(rows),
        "",
        "Paper 000 (real LWR 4+, 10 static poses, 1 s dwell each): 3.059 kg for 3.028 kg (+1.0 %), CoM error up to",
        "11 mm (eq. 47); all three human contacts detected at 6 N m with the payload-updated residual (Fig. 6).",
        "The sample call's sim time is the robot time a real arm would need; wall time is slower here because",
        "the 2-core machine runs the simulator and all nodes in Python. Contact link and force: the core monitor's",
        "estimate on the recorded joint states (`?` = flagged ambiguous: a range, not a guess).",
        "",
        "## Online demo (`./run demo --online`: pick and place with the online estimate, no sampling motion)",
        "",
        f"- machine: {machine()} (at the end); date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "- command: the same script (each = `./run demo --online --robot R`); plot: `online_estimate.png` in --out",
        "- same arm, noise, model error and payload as above; nominal model (declared 5 %), no calibrated gravity "
        "model; 0.5 s unloaded rest, grasp announced, three 3.0 s point-to-point moves of 180 deg in total "
        "(pick -> place -> pick -> place); a 40 N push on link 4 1.5 s into move 2 (the monitor stops and resumes); "
        "the object dropped (sim_node/detach_payload) 1.0 s into move 3",
        "- errors against MuJoCo's payload (sim_node/true_payload); σ from payload_estimator/online_estimate; "
        "delays from the injection (sim time) to the monitor's detection time / its verdict or collision flag",
        "",
        *online_table(online),
        "",
        "The estimate is scored at the end of the undisturbed move 1. The push is kept out of the online fit (the",
        "estimator takes back the rows of the last 0.15 s when the monitor reports a collision): 'after the push' is",
        "the estimate at the end of move 2. The thresholds widen by 3σ of the estimate's gravity torque (1-2 % here:",
        "σ narrows during the move: the model's error is fitted with the payload). Node status threshold_scale reads",
        "1.0 whenever it is published right after a new estimate (the widening is re-applied at the next sample).",
        "Detection and verdict delays are in stream time; the collision flag's delay is when this client received it",
        "(hundreds of ms on a loaded machine: the monitor's joint_states processing lags).",
    ]
    text = "\n".join(lines) + "\n"
    write_section("demo", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
