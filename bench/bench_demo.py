"""The demo mission as a benchmark: static and dynamic estimate accuracy, sample call time, detections.

Runs `payload-estimation demo` (all nodes as processes over DDS, MuJoCo arm with torque noise and
3 % model error) for each robot and records its summary next to paper 000's figures.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["lwr4", "iiwa14"])
    args = ap.parse_args()
    rows = []
    for robot in args.robots:
        out = Path(tempfile.mkdtemp(prefix=f"demo_{robot}_"))
        print(f"[bench_demo] {robot} ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        cmd = [sys.executable, "-m", "payload_estimation.cli", "demo", "--robot", robot, "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        rc = proc.returncode
        if rc != 0:
            print(proc.stdout[-2000:] + proc.stderr[-4000:], file=sys.stderr)
        wall = time.monotonic() - t0
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
        rows.append((robot, rc, wall, summary))
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
    ]
    text = "\n".join(lines) + "\n"
    write_section("demo", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
