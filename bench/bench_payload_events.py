"""Announced grasp and release (issue 27 item 4): false alarms, and contacts detected inside the window.

Per robot, random pick configurations (benchlib.pick_configurations: stretched up, near limits, random) and
box payloads of 0.5-5 kg (benchlib.payload), on the MuJoCo arm (3 % model error, 0.1 N m torque noise, the
monitor's node defaults: K_I 150/s, 6 N m, 3 confirming samples; window 5 s):

- grasp / release announced, the payload attached / detached 0-1 s after the announcement (a release: the
  monitor carried the true payload and the estimator's 0 kg arrives with the announcement): any detection
  within the window + 1 s is a false alarm; the same change unannounced: detected or not (today's behaviour);
- a contact (40 or 80 N in a random direction at the origin of a random link 3..n, 0.2 s) at a random moment
  0.02-1 s after an announced grasp's payload change: detected, and the delay from the contact's start;
- the same contact with the payload known (no window; the observer carries the true payload): the reference;
- a point-to-point move (30-120 deg in total over 1.5-4 s) starting 0.2 s or 0.7 s after an announced grasp's
  payload change (before / after the monitor has learnt the payload at rest): runs with a detection.

Usage: .venv/bin/python bench/bench_payload_events.py [--robots lwr4 iiwa14] [--runs 20]
  -> docs/bench/payload_events.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from benchlib import machine, payload, pick_configurations, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from payload_estimation.collision import GRASP, RELEASE, CollisionMonitor, MonitorConfig, PayloadWatch, WatchConfig  # noqa: E402
from payload_estimation.model import RigidBodyDynamics, load_robot  # noqa: E402
from payload_estimation.reporting import format_table  # noqa: E402
from payload_estimation.sim import SensorConfig, SimConfig, SimulatedArm  # noqa: E402

T_ANNOUNCE = 0.3  # s


def _detected(mon):
    ev = mon.detector.current
    return None if ev is None else ev.detection_time


def run(dyn, q0, body, *, kind: str, announce: bool, delay: float, known: bool = False,
        contact: tuple[float, str, np.ndarray] | None = None, seconds: float = 1.5, seed: int = 0,
        move: tuple[float, np.ndarray, float] | None = None) -> list[float]:
    """Detection times (s) of one run; see the module docstring."""
    arm = SimulatedArm(dyn.desc, SimConfig(dt=0.001, seed=seed, model_error=0.03, sensor=SensorConfig(noise_std=0.1)))
    arm.reset(q0)
    mon = CollisionMonitor(dyn, MonitorConfig())
    watch = PayloadWatch(dyn, 6.0, WatchConfig())
    mon.explain = watch.explain
    if kind == RELEASE or known:
        arm.attach_payload(body)
        arm.reset(q0)
        mon.set_payload(body)
        watch.carried(body)
    out = []
    k_change = round((T_ANNOUNCE + delay) * 1000)
    for k in range(round(seconds * 1000)):
        if k == round(T_ANNOUNCE * 1000) and announce:
            watch.announce(kind)
            if kind == RELEASE:
                mon.set_payload(None)
        if k == k_change and not known:
            arm.detach_payload() if kind == RELEASE else arm.attach_payload(body)
        if move is not None and k == round(move[0] * 1000):
            arm.set_trajectory([(move[2], move[1], None)])
        if contact is not None and k == round(contact[0] * 1000):
            arm.apply_contact(contact[1], contact[2], None, 0.2)
        arm.step(1)
        s = arm.state()
        step = mon.update(s.t, s.q, s.dq, s.tau)
        w = watch.update(s.t, s.q, s.dq, s.tau, settle=5.0 / 150.0, detected=_detected(mon))
        if w.fit is not None:
            mon.set_payload(*(watch.observer_model(w.fit) if watch.learning else (None, False)))
        if w.scale is not None:
            mon.detector.scale_thresholds(w.scale)
        if step.event is not None and step.event.active:
            out.append(step.event.detection_time)
    return out


def bench_robot(robot: str, runs: int, rng: np.random.Generator) -> dict:
    dyn = RigidBodyDynamics(load_robot(robot))
    res = {k: [] for k in ("grasp_fa", "release_fa", "grasp_plain", "release_plain", "move0.2", "move0.7")}
    lim = dyn.desc.limits.position
    res.update({f"{w}{f}": [] for w in ("window", "known") for f in (40, 80)})
    poses = pick_configurations(dyn.desc, runs, rng)
    for i, (_, q0) in enumerate(poses):
        body = payload(rng, rng.uniform(0.5, 5.0))
        delay = rng.uniform(0.0, 1.0)
        end = T_ANNOUNCE + delay + 6.0  # window (5 s from the announcement) + 1 s, and the change inside it
        for kind in (GRASP, RELEASE):
            res[f"{kind}_fa"].append(len(run(dyn, q0, body, kind=kind, announce=True, delay=delay, seconds=end,
                                             seed=i)))
            res[f"{kind}_plain"].append(len(run(dyn, q0, body, kind=kind, announce=False, delay=0.0,
                                                seconds=T_ANNOUNCE + 0.5, seed=i)) > 0)
        step = rng.normal(size=dyn.n)
        target = np.clip(q0 + step / np.abs(step).sum() * np.radians(rng.uniform(30, 120)), lim[:, 0] + 0.17,
                         lim[:, 1] - 0.17)
        duration = rng.uniform(1.5, 4.0)
        for wait in (0.2, 0.7):
            t_m = T_ANNOUNCE + delay + wait
            res[f"move{wait}"].append(len(run(dyn, q0, body, kind=GRASP, announce=True, delay=delay, seed=i,
                                              move=(t_m, target, duration), seconds=t_m + duration + 0.5)))
        for force in (40, 80):
            link = f"link_{rng.integers(3, dyn.n + 1)}"
            f = rng.normal(size=3)
            f *= force / np.linalg.norm(f)
            t_c = T_ANNOUNCE + delay + rng.uniform(0.02, 1.0)
            for where, known in (("window", False), ("known", True)):
                det = run(dyn, q0, body, kind=GRASP, announce=not known, delay=delay, known=known,
                          contact=(t_c, link, f), seconds=t_c + 0.3, seed=i)
                after = [d - t_c for d in det if d >= t_c]
                res[f"{where}{force}"].append(after[0] if after else None)
        print(f"{robot} run {i + 1}/{runs}: false alarms grasp {res['grasp_fa'][-1]} release {res['release_fa'][-1]} "
              f"moves {res['move0.2'][-1]} {res['move0.7'][-1]}; "
              f"contacts {[res[k][-1] for k in ('window40', 'known40', 'window80', 'known80')]}", flush=True)
    return res


def _rate(xs) -> str:
    det = [x for x in xs if x is not None]
    if not det:
        return f"0/{len(xs)}"
    return f"{len(det)}/{len(xs)}, delay median {1e3 * np.median(det):.0f} ms, max {1e3 * max(det):.0f} ms"


def report(results: dict[str, dict], runs: int) -> str:
    lines = ["# Announced grasp and release: false alarms and contacts inside the window", "",
             f"{datetime.date.today()}, {machine()}. `.venv/bin/python bench/bench_payload_events.py --runs {runs}`",
             "(module docstring: set-up). A false alarm: any detection in an announced run.", ""]
    rows = []
    for robot, r in results.items():
        n = len(r["grasp_fa"])
        rows.append([robot, f"{sum(x > 0 for x in r['grasp_fa'])}/{n}", f"{sum(x > 0 for x in r['release_fa'])}/{n}",
                     f"{sum(r['grasp_plain'])}/{n}", f"{sum(r['release_plain'])}/{n}",
                     f"{sum(x > 0 for x in r['move0.2'])}/{n}", f"{sum(x > 0 for x in r['move0.7'])}/{n}"])
    lines += format_table(["robot", "announced grasp: runs with a false alarm", "announced release",
                           "unannounced grasp detected", "unannounced release detected",
                           "move 0.2 s after the grasp: runs with a detection", "move 0.7 s after"], rows,
                          pad=False).splitlines()
    lines += ["", "Contacts 0.02-1 s after an announced grasp's payload change (window) and with the payload known:",
              ""]
    rows = [[robot, f"{f} N", _rate(r[f"window{f}"]), _rate(r[f"known{f}"])]
            for robot, r in results.items() for f in (40, 80)]
    lines += format_table(["robot", "force", "detected in the window", "detected, payload known"], rows,
                          pad=False).splitlines()
    lines += ["", "A contact is missed in the window only where a payload of up to `max_payload` hanging from the "
              "tool explains its torque (collision/payload_change.py), or where what is left stays below the "
              "thresholds."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["lwr4", "iiwa14"])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    results = {robot: bench_robot(robot, a.runs, rng) for robot in a.robots}
    text = report(results, a.runs)
    print(text)
    print(write_section("payload_events", text))


if __name__ == "__main__":
    main()
