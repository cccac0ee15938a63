"""Benchmark on a real robot's log: identify a Franka Emika Panda from Gaz et al. 2019's recording.

Usage (repository root): .venv/bin/python bench/bench_panda.py [--dataset DIR] [--repeats 3]
Writes docs/bench/panda.md. DIR (default ../shared/datasets/panda-gaz2019 next to the repository,
else /work/shared/datasets/panda-gaz2019) holds trajectory_1.csv and panda_mdh.yaml (GPL-3.0 data:
read there, never copied into the project).

Every `identify` variant (velocity source x friction model x essential) is run through the command
line exactly as printed, fitting on the first 70 % of the log by time and predicting the last 30 %
(validate's processing: 1 kHz linear resample, zero-phase 4th-order Butterworth at 6 Hz on q and
tau, 2 cut-off periods dropped at each end). Reported: hold-out RMS (total and per joint) of the
coefficient file and of the physically consistent link file, beside the published model's 0.295 N m
(README of the dataset), time per run (median of --repeats, and its ratio to loading the CSV).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchlib import machine, write_section  # noqa: E402

from payload_estimation.cli import main as cli_main  # noqa: E402
from payload_estimation.files import load_recording  # noqa: E402
from payload_estimation.model import load_robot  # noqa: E402
from payload_estimation.reporting import format_table  # noqa: E402

# The dataset README's figures for the authors' published model (last 30 % by time, t >= 14.70 s)
PUBLISHED = (0.295, (0.195, 0.664, 0.163, 0.281, 0.114, 0.098, 0.058))
PUBLISHED_NO_FRICTION = 0.433


def default_dataset() -> Path:
    for p in (ROOT.parent / "shared" / "datasets" / "panda-gaz2019", Path("/work/shared/datasets/panda-gaz2019")):
        if p.exists():
            return p
    return ROOT.parent / "shared" / "datasets" / "panda-gaz2019"


def run_cli(argv: list[str]) -> tuple[str, float]:
    """stdout of one in-process command and its wall time (s)."""
    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        rc = cli_main(argv)
    dt = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"command failed ({rc}): {' '.join(argv)}\n{buf.getvalue()[-2000:]}")
    return buf.getvalue(), dt


def hold_out_rows(text: str) -> dict[str, list[float]]:
    """{'coefficients': [total, j1..j7], 'physical': [...], 'nominal': [...]} from identify's table."""
    out = {}
    for line in text.splitlines():
        for key, start in (("coefficients", "| coefficients"), ("physical", "| physical link set"),
                           ("nominal", "| nominal description")):
            if line.startswith(start):
                out[key] = [float(c) for c in line.strip().strip("|").split("|")[1:]]
    return out


def candidates(line: str) -> dict[str, float]:
    """{'none': 0.3146, 'viscous+coulomb': ...} from identify's 'friction: ... per candidate: ...' line."""
    out = {}
    for part in line.split("candidate: ")[-1].split(", "):
        name, value = part.split()[:2]
        out[name] = float(value)
    return out


def field(text: str, prefix: str) -> str:
    return next((line for line in text.splitlines() if line.startswith(prefix)), "")


def fmt_row(label: str, values, *extra: str) -> list[str]:
    """Table cells: the label, the total RMS (bold) and the per-joint RMS (N m), then ``extra``."""
    return [label, f"**{values[0]:.3f}**", *(f"{v:.3f}" for v in values[1:]), *extra]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", type=Path, default=default_dataset(), help="panda-gaz2019 dataset directory")
    ap.add_argument("--repeats", type=int, default=3, help="runs per variant for the timing median (default 3)")
    args = ap.parse_args()
    data, robot = args.dataset / "trajectory_1.csv", args.dataset / "panda_mdh.yaml"
    if not data.exists() or not robot.exists():
        print(f"bench_panda: {args.dataset} does not hold trajectory_1.csv and panda_mdh.yaml; pass --dataset",
              file=sys.stderr)
        return 2
    desc = load_robot(robot)
    floor = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        rec = load_recording(data, desc)
        floor.append(time.perf_counter() - t0)
    load_s = statistics.median(floor)
    tmp = Path(tempfile.mkdtemp(prefix="bench_panda_"))
    shown = "DATASET"  # the printed commands use the dataset directory as DATASET
    variants = []
    for velocity in ("positions", "recorded"):
        for friction in ("none", "viscous+coulomb", "auto"):
            for essential in (False, True):
                variants.append((velocity, friction, essential))
    run_cli(["identify", "--robot", str(robot), "--data", str(data), "--hold-out", "0.3",
             "--out", str(tmp / "warmup.yaml")])  # imports and caches out of the timings
    results = []
    for velocity, friction, essential in variants:
        out = tmp / "panda.yaml"
        opts = ["--hold-out", "0.3", "--physical", "--velocity", velocity, "--friction", friction]
        opts += ["--essential"] if essential else []
        argv = ["identify", "--robot", str(robot), "--data", str(data), *opts, "--out", str(out)]
        times, text = [], ""
        for _ in range(args.repeats):
            text, dt = run_cli(argv)
            times.append(dt)
        rows = hold_out_rows(text)
        phys_line = field(text, "physical parameters:")
        results.append({
            "velocity": velocity, "friction": friction, "essential": essential, "rows": rows,
            "chosen": field(text, "friction:"), "kept": field(text, "robot panda:"),
            "seconds": statistics.median(times), "physical": phys_line,
            "mq": field(text, "physical link set: smallest eigenvalue"),
            "warnings": [line.strip() for line in text.splitlines() if line.startswith("  warning:")],
            "velocities": field(text, "velocities:"), "preprocessing": field(text, "preprocessing:"),
            "command": "payload-estimation identify --robot DATASET/panda_mdh.yaml --data DATASET/trajectory_1.csv "
                       + " ".join(opts) + " --out panda.yaml",
        })
        print(f"[bench_panda] {velocity:9s} {friction:16s} essential={essential!s:5s}: coefficients "
              f"{rows['coefficients'][0]:.3f}, physical {rows['physical'][0]:.3f} N m, "
              f"{results[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    # validate the written physical file through `validate` once (auto/recorded variant), for the record
    run_cli(["identify", "--robot", str(robot), "--data", str(data), "--hold-out", "0.3", "--physical",
             "--out", str(tmp / "best.yaml")])
    vtext, _ = run_cli(["validate", "--robot", str(robot), "--params", str(tmp / "best_robot.yaml"), "--data",
                        str(data), "--hold-out", "0.3"])
    vall = field(vtext, "| all |")

    names = [f"j{j + 1}" for j in range(desc.n)]
    head = ["variant", "total", *names]
    align = "lr" + "r" * desc.n
    coefficients = [fmt_row("published model (authors', with friction; dataset README)", (PUBLISHED[0], *PUBLISHED[1]))]
    for r in results:
        label = f"{r['velocity']}, friction {r['friction']}{', essential' if r['essential'] else ''}"
        coefficients.append(fmt_row(label, r["rows"]["coefficients"]))
    for v in ("positions", "recorded"):
        nom = next(r for r in results if r["velocity"] == v)["rows"]["nominal"]
        coefficients.append(fmt_row(f"nominal p-hat description, no friction ({v})", nom))
    physical = []
    for r in results:
        label = f"{r['velocity']}, friction {r['friction']}{', essential' if r['essential'] else ''}"
        mq = r["mq"].split("hold-out ")[-1].split(" (")[0] if r["mq"] else "n/a"
        pd = "PD" if "positive definite" in r["mq"] and "NOT" not in r["mq"] else "not PD"
        physical.append(fmt_row(label, r["rows"]["physical"], f"min eig {mq} ({pd})", str(len(r["warnings"])),
                                f"{r['seconds']:.1f} s ({r['seconds'] / load_s:.0f} x load)"))
    lines = [
        "## Real robot: Franka Emika Panda (Gaz et al. 2019 log)",
        "",
        f"Machine: {machine()}. Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC. "
        f"Command: `.venv/bin/python bench/bench_panda.py --dataset {shown}` with DATASET = `{args.dataset}` "
        "(GPL-3.0 data, read in place).",
        "",
        "The log as recorded: "
        + "; ".join(line.strip() for line in rec.report.lines()).replace(str(data), "trajectory_1.csv") + ".",
        "",
        "Every variant below is one `identify` command (printed under the tables) fitting on the first 70 % of the "
        "log by time and predicting the last 30 % with `validate`'s processing (t = 14.70..21.0 s; 5630 samples after "
        "dropping the filter edges; 1 kHz linear resample, zero-phase order-4 Butterworth at 6 Hz on q and tau, "
        "2 cut-off periods dropped at each end, as the dataset README computes the published model's figure). "
        "`--velocity recorded` uses the logged dq (low-passed alike); `positions` differentiates q.",
        "",
        "**Hold-out torque RMS of the coefficient file** (N m)",
        "",
        *format_table(head, coefficients, align, pad=False).splitlines(),
    ]
    lines += ["", "**Hold-out torque RMS of the physically consistent link file** (`OUT_robot.yaml`, links + "
                  "the identified friction/offsets; N m) and what it took", "",
              *format_table([*head, "M(q) along the hold-out", "bound warnings", "time per run"], physical,
                            align + "lrr", pad=False).splitlines()]
    goal_c = [r for r in results if r["rows"]["coefficients"][0] <= PUBLISHED[0]]
    goal_p = [r for r in results if r["rows"]["physical"][0] <= PUBLISHED[0]]
    def without(r):
        return next(s for s in results if s["velocity"] == r["velocity"] and s["friction"] == r["friction"]
                    and not s["essential"])

    ess = [r for r in results if r["essential"]]
    d_coef = max(r["rows"]["coefficients"][0] - without(r)["rows"]["coefficients"][0] for r in ess)
    d_phys = max(r["rows"]["physical"][0] - without(r)["rows"]["physical"][0] for r in ess)
    auto = {v: next(r for r in results if r["velocity"] == v and r["friction"] == "auto") for v in
            ("positions", "recorded")}
    lines += [
        "",
        f"Timing: median of {args.repeats} runs of the whole command (load, resample, filter, fit, physical set, "
        f"hold-out validation, files), in-process; loading the CSV alone takes {load_s:.2f} s (the floor).",
        "",
        "**Goal of issue 16** (both files <= the published 0.295 N m on the hold-out, the link set consistent, "
        "`--essential` never worse): "
        f"coefficient file meets it in {len(goal_c)} of {len(results)} variants, the physical link file in "
        f"{len(goal_p)} of {len(results)} -- every variant with friction; without friction neither can "
        f"(the published model without its friction term: {PUBLISHED_NO_FRICTION} N m). "
        f"Every physical set has M(q) positive definite along the hold-out: "
        f"{'yes' if all('positive definite' in r['mq'] and 'NOT' not in r['mq'] for r in results) else 'NO'}. "
        f"`--essential` against the same variant without it: physical link file {d_phys:+.4f} N m at worst (it is "
        "fitted to all base coefficients either way: essential elimination shapes the coefficient file only); "
        f"coefficient file {d_coef:+.4f} N m at worst -- dropping poorly identified coefficients is not free on "
        "new data, but costs less than 1 % here.",
        "",
        "**Friction model chosen from the data** (`--friction auto`: every combination of viscous, Coulomb and "
        "offset per joint fitted on the same rows, lowest BIC kept); fit residual RMS per candidate on the 70 %:",
        "",
        f"- positions: {auto['positions']['chosen'].split('candidate: ')[-1]}",
        f"- recorded dq: {auto['recorded']['chosen'].split('candidate: ')[-1]}",
        "",
        "Link-side torque sensors see the friction of the joint's own output bearing and seals: on this log "
        + "; ".join(f"with {v} velocities friction lowers the fit residual from {c['none']:.3f} to "
                    f"{c['viscous+coulomb']:.3f} N m (viscous + Coulomb) and {c['viscous+coulomb+offset']:.3f} N m "
                    "with the offsets" for v, c in ((v, candidates(auto[v]['chosen'])) for v in auto)) + ".",
        "",
        f"Recorded velocities: {auto['recorded']['velocities'].removeprefix('velocities: ')}.",
        "",
        f"The physical file of the default variant (`--physical --hold-out 0.3`, i.e. friction auto, recorded dq) "
        f"through `validate --params OUT_robot.yaml --hold-out 0.3`: all joints {vall.split('|')[2].strip()} N m "
        "RMS (the same figure as identify's table).",
        "",
        "Commands (DATASET as above):",
        "",
    ]
    lines += [f"- `{r['command']}`" for r in results]
    lines += ["- `payload-estimation validate --robot DATASET/panda_mdh.yaml --params panda_robot.yaml "
              "--data DATASET/trajectory_1.csv --hold-out 0.3 --plot panda.png --out panda_holdout.csv`"]
    warn = sorted({w for r in results for w in r["warnings"]})
    if warn:
        lines += ["", "Bound warnings printed by the runs: " + "; ".join(w.removeprefix("warning: ") for w in warn)]
    text = "\n".join(lines) + "\n"
    path = write_section("panda", text)
    print(text)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
