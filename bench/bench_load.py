"""A busy machine aborts nothing (issue 48): the demo, a static sample, a dynamic sample and a sweep, each ``--runs``
times with N busy processes beside them (N = the machine's cores: ``while True: pass``, one per core).

Parts (each over real DDS, its own ROS domain in 40-49):

- **demo**: ``payload-estimation demo --robot R`` as a user runs it (simulator and nodes as processes); success = exit
  0; accuracy = its summary's static and dynamic mass error (%) and CoM error (mm) against the simulator's payload;
- **sweep**: ``payload_sampler/sweep`` on the unloaded arm (the rig of bench_cpu.py: iiwa14, 1 kHz, the package's
  parameter file), back to back; then one ``record_reference`` (the dynamic samples' reference), a grasp announced
  and a 2 kg payload attached;
- **static** / **dynamic**: ``payload_sampler/sample`` with ``mode`` static / dynamic, back to back; accuracy = the
  published payload/estimate against the simulator's payload (2 kg, CoM (30, -20, 80) mm; noise-free, exact model).

A run that failed says why (the first line of its answer); one the sampler or the demo tried once more by itself
(a real gap in joint_states) counts as a success and is counted in "retried".

Usage: .venv/bin/python bench/bench_load.py [--runs 10] [--parts demo sweep static dynamic] [--busy N]
       [--no-write]     -> the load-test section of docs/bench/cpu.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from bench_cpu import COM, MASS, Rig  # noqa: E402
from benchlib import BENCH_DOCS, machine  # noqa: E402

ROBOT = "iiwa14"
BEGIN, END = "<!-- bench_load.py: begin -->", "<!-- bench_load.py: end -->"
RETRIED = "tried once more by itself"  # sampling.sampler.RETRIED_NOTE (the answers say it)


def busy(n: int) -> list[subprocess.Popen]:
    """``n`` processes spinning on a core each."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def demo_runs(runs: int, domain: int) -> dict:
    """``runs`` demos: (ok, retried, first failure line, static/dynamic mass %, CoM mm, wall s) each."""
    out = []
    for k in range(runs):
        d = Path(tempfile.mkdtemp(prefix="load_demo_"))
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "payload_estimation.cli", "demo", "--robot", ROBOT, "--out",
                               str(d), "--domain-id", str(domain)], capture_output=True, text=True)
        wall = time.monotonic() - t0
        s = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else None
        why = "" if proc.returncode == 0 else next(
            (ln for ln in (proc.stderr + proc.stdout).splitlines() if "FAILED" in ln), f"exit {proc.returncode}")
        if proc.returncode != 0:  # the nodes' own words on what they saw (their log is the demo's output)
            (d / "demo.log").write_text(proc.stdout + proc.stderr)
            seen = [ln.split("]: ", 1)[-1] for ln in (proc.stdout + proc.stderr).splitlines()
                    if any(w in ln for w in ("is blind", "ran ", "lost for", "gap", "stopped monitoring"))]
            why += f" [log {d / 'demo.log'}; the nodes said: {' | '.join(seen[:3]) or 'nothing of a gap'}]"
        retried = proc.stdout.count("once more") + proc.stdout.count(RETRIED)
        acc = None if s is None else {m: (s[m]["mass_error_pct"], s[m]["com_error_mm"]) for m in ("static", "dynamic")}
        out.append({"ok": proc.returncode == 0, "retried": retried > 0, "why": why[:200], "acc": acc, "wall": wall})
        print(f"[bench_load] demo {k + 1}/{runs}: {'ok' if out[-1]['ok'] else why[:160]} ({wall:.0f} s)",
              file=sys.stderr, flush=True)
    return {"runs": out}


def rig_runs(runs: int, parts: list[str], domain: int) -> dict:
    """The sweeps, then the static and dynamic samples with the payload attached, on one rig."""
    from rclpy.executors import SingleThreadedExecutor

    from payload_estimation.model import load_robot
    from payload_estimation.ros.domain import isolate
    from payload_estimation.ros.mission import MissionClient
    from payload_estimation.ros.spin_thread import SpinThread

    isolate(domain)
    rig = Rig(f"/load{os.getpid()}")
    client = MissionClient(load_robot(ROBOT).joint_names, name="load_client")
    spin = SpinThread(SingleThreadedExecutor(), client)
    res: dict = {}
    try:
        rig.wait_ready(180.0)
        client.wait_for(lambda: client.now() > 0.5, 60.0, "the simulation to run")
        if "sweep" in parts:
            res["sweep"] = _calls(client, "payload_sampler/sweep", runs, "sweep", None)
        if "dynamic" in parts:
            r = client.call("payload_sampler/record_reference", timeout=300.0)
            res["reference"] = {"ok": r.success, "why": _first(r.message), "retried": RETRIED in r.message}
        if "static" in parts or "dynamic" in parts:
            for s in ("payload_estimator/grasped", "sim_node/attach_payload", "payload_estimator/grasped"):
                r = client.announce(s) if "grasped" in s else client.call(s)
                time.sleep(0.3)
            client.sleep_sim(0.5)
            client.wait_for(lambda: np.max(np.abs(client.q_dot)) < 2e-3, 60.0, "rest after the grasp")
            client.sleep_sim(0.5)
        for mode in ("static", "dynamic"):
            if mode in parts:
                client.set_parameters("payload_sampler", {"mode": mode})
                res[mode] = _calls(client, "payload_sampler/sample", runs, mode, (MASS, np.asarray(COM)))
    finally:
        spin.stop()
        client.destroy_node()
        rig.stop()
    return res


def _first(text: str) -> str:
    return text.splitlines()[0][:200] if text else ""


def _calls(client, service: str, runs: int, label: str, truth) -> dict:
    out = []
    for k in range(runs):
        seen = client.estimates
        t0 = time.monotonic()
        try:
            r = client.call(service, timeout=300.0)
            ok, text = bool(r.success), r.message
        except Exception as e:  # noqa: BLE001 -- a run that did not answer is a failure of the load test
            ok, text = False, f"{type(e).__name__}: {e}"
        wall = time.monotonic() - t0
        acc = None
        if ok and truth is not None:
            try:
                client.wait_for(lambda seen=seen: client.estimates > seen, 10.0, "payload/estimate")
                e = client.estimate
                acc = (100.0 * (e.mass - truth[0]) / truth[0], 1e3 * float(np.linalg.norm(e.com - truth[1])))
            except Exception:  # noqa: BLE001
                acc = None
        out.append({"ok": ok, "retried": RETRIED in text, "why": "" if ok else _first(text), "acc": acc,
                    "wall": wall})
        print(f"[bench_load] {label} {k + 1}/{runs}: {'ok' if ok else _first(text)[:160]} ({wall:.0f} s)",
              file=sys.stderr, flush=True)
        if ok:
            client.wait_for(lambda: np.max(np.abs(client.q_dot)) < 2e-3, 60.0, "rest after sampling")
    return {"runs": out}


def rows(res: dict) -> list[list[str]]:
    table = []
    for part in ("demo", "sweep", "static", "dynamic"):
        if part not in res:
            continue
        runs = res[part]["runs"]
        ok = [r for r in runs if r["ok"]]
        fails = sorted({r["why"] for r in runs if not r["ok"]})
        if part == "demo":
            accs = [r["acc"] for r in runs if r["acc"]]
            acc = "; ".join(
                f"{m}: mass error ≤ {max(abs(a[m][0]) for a in accs):.2f} %, CoM ≤ {max(a[m][1] for a in accs):.1f} mm"
                for m in ("static", "dynamic")) if accs else "-"
        else:
            accs = [r["acc"] for r in runs if r["acc"]]
            acc = (f"mass error median {np.median([abs(a[0]) for a in accs]):.2f} %, max "
                   f"{max(abs(a[0]) for a in accs):.2f} %; CoM median {np.median([a[1] for a in accs]):.1f} mm, "
                   f"max {max(a[1] for a in accs):.1f} mm" if accs else "-" if part == "sweep" else "no estimate")
        table.append([part, f"{len(ok)}/{len(runs)}", str(sum(r["retried"] for r in runs)),
                      f"{np.median([r['wall'] for r in runs]):.0f} s", acc, "; ".join(fails)[:600] or "-"])
    return table


def write(text: str) -> None:
    """Put the section into docs/bench/cpu.md between its markers (after the kept part: bench_cpu.py keeps it)."""
    path = BENCH_DOCS / "cpu.md"
    doc = path.read_text()
    block = f"{BEGIN}\n{text}{END}\n"
    if BEGIN in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + block + rest.split(END, 1)[1].lstrip("\n")
    else:
        kept = "<!-- kept by bench_cpu.py: an earlier run, for comparison -->"
        head, tail = doc.split(kept, 1) if kept in doc else (doc, None)
        doc = head + kept + "\n\n" + block + tail if tail is not None else doc + "\n" + kept + "\n\n" + block
    path.write_text(doc)


def main() -> int:
    from payload_estimation.reporting import format_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--parts", nargs="+", default=["demo", "sweep", "static", "dynamic"],
                    choices=["demo", "sweep", "static", "dynamic"])
    ap.add_argument("--busy", type=int, default=os.cpu_count(), help="busy processes (default: the cores)")
    ap.add_argument("--domain", type=int, default=40, help="ROS_DOMAIN_ID of the rig; the demo uses +1")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()
    load0 = os.getloadavg()[0]
    spinners = busy(args.busy)
    res: dict = {}
    try:
        if "demo" in args.parts:
            res["demo"] = demo_runs(args.runs, args.domain + 1)
        rig_parts = [p for p in args.parts if p != "demo"]
        if rig_parts:
            res.update(rig_runs(args.runs, rig_parts, args.domain))
    finally:
        stop(spinners)
    cmd = " ".join(["bench/bench_load.py", *sys.argv[1:]])
    ref = res.get("reference")
    lines = [
        f"## Load test (issue 48): {args.busy} busy processes beside the demo and the sampler's runs",
        "",
        f"- machine: {machine()} (at the end; load avg at the start {load0:.1f}, before the busy processes)",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; the run took "
        f"{time.monotonic() - t0:.0f} s",
        f"- command: `.venv/bin/python {cmd}` (full run: `.venv/bin/python bench/bench_load.py --runs 10`)",
        f"- {args.busy} processes `while True: pass` (one per core) run beside everything; {ROBOT}, 1 kHz "
        "joint_states, the package's parameter file (joint_state_timeout automatic). demo = `./run demo --robot "
        f"{ROBOT}` (accuracy: its static and dynamic estimates against the simulator's 3 kg payload, torque noise "
        "and 3 % model error); sweep/static/dynamic = `payload_sampler/sweep` / `sample` (mode static / dynamic, "
        f"differential against one record_reference) on bench_cpu's rig, back to back ({MASS:g} kg attached, "
        "noise-free, exact model). retried = runs that succeeded on their second attempt after a real gap in "
        "joint_states (said in their answer)",
        "",
        *format_table(["part", "succeeded", "retried", "wall per run (median)", "accuracy of the estimates",
                       "failures (first line of the answer)"], rows(res), "lrrrll", pad=False).splitlines(),
    ]
    if ref is not None:
        lines += ["", f"The dynamic samples' record_reference: {'ok' if ref['ok'] else 'FAILED: ' + ref['why']}"
                      f"{' (retried)' if ref['retried'] else ''}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
