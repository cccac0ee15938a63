"""`payload-estimation residual`: run the momentum observer and collision detector over a recorded run."""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..collision import CollisionDetector, CollisionEvent, MomentumObserver
from ..identification.data import SampleDataError, load_csv
from ..identification.estimate import PayloadEstimate
from ..model.dynamics import RigidBodyDynamics
from ..model.robot_file import load_robot

HELP = "momentum-observer residual and collision events of a recorded run (t, q*, dq*, tau* CSV)"


class ResidualArgumentError(ValueError):
    """A command-line value is malformed; the message names the option."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", required=True, help="robot name (lwr4, iiwa14) or robot description file")
    parser.add_argument("--data", required=True, type=Path, help="CSV with columns t, q1..qn, dq1..dqn, tau1..taun")
    pay = parser.add_mutually_exclusive_group()
    pay.add_argument("--payload", help="known payload 'm,cx,cy,cz' (kg, m in the payload frame); gravity only")
    pay.add_argument("--payload-file", type=Path, help="payload estimate JSON (`payload-estimation estimate --json`)")
    parser.add_argument("--threshold", default="6", help="detection threshold in N m: one value or one per joint "
                                                         "'t1,...,tn' (default 6, paper 000)")
    parser.add_argument("--release", type=float, default=0.5, help="release threshold as a fraction of the "
                                                                  "detection threshold (hysteresis, default 0.5)")
    parser.add_argument("--gain", default="25", help="observer gain K_I in 1/s: one value or one per joint "
                                                     "(default 25)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--out", type=Path, help="write t, r1..rn, collision to this CSV")


def _floats(text: str, option: str, n: int | None = None) -> np.ndarray:
    try:
        values = np.array([float(x) for x in str(text).split(",")])
    except ValueError:
        raise ResidualArgumentError(f"{option}: '{text}' is not a comma-separated list of numbers") from None
    if n is not None and values.size not in (1, n):
        raise ResidualArgumentError(f"{option}: expected 1 or {n} values, got {values.size} ('{text}')")
    return values if values.size > 1 else values[0]


def _payload(args) -> PayloadEstimate | None:
    if args.payload:
        v = _floats(args.payload, "--payload")
        if np.ndim(v) == 0 or v.size != 4:
            raise ResidualArgumentError(f"--payload: expected 'm,cx,cy,cz' (4 numbers), got '{args.payload}'")
        return PayloadEstimate(float(v[0]), v[1:4].copy(), method="given")
    if args.payload_file:
        try:
            return PayloadEstimate.from_dict(json.loads(Path(args.payload_file).read_text()))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ResidualArgumentError(f"--payload-file {args.payload_file}: not a payload estimate ({exc})") from None
    return None


@dataclass(frozen=True)
class ResidualRun:
    """Result of :func:`run_residual`: residual per sample (N x n, N m), collision flag, events."""

    t: np.ndarray
    r: np.ndarray
    collision: np.ndarray
    events: list[CollisionEvent]
    max_outside_events: np.ndarray  # per joint, N m

    def to_dict(self) -> dict:
        return {
            "samples": int(self.t.size),
            "events": [e.to_dict() for e in self.events],
            "max_abs_residual_outside_events": [float(x) for x in self.max_outside_events],
            "max_abs_residual_outside_events_overall": float(self.max_outside_events.max(initial=0.0)),
        }


def run_residual(dyn: RigidBodyDynamics, t, q, dq, tau, payload: PayloadEstimate | None = None, gains=25.0,
                 thresholds=6.0, release_fraction: float = 0.5) -> ResidualRun:
    """Observer + detector over arrays (N samples x n joints); an event still active at the end is kept."""
    obs = MomentumObserver(dyn, gains)
    obs.set_payload(payload)
    det = CollisionDetector(dyn.n, thresholds, release_fraction=release_fraction)
    r = np.empty((len(t), dyn.n))
    flag = np.zeros(len(t), dtype=bool)
    for k in range(len(t)):
        r[k] = obs.update(t[k], q[k], dq[k], tau[k])
        det.update(t[k], r[k])
        flag[k] = det.in_collision
    events = list(det.events)
    if det.current is not None:
        events.append(det.current)
    # an event spans its whole excursion: from the sample where |r| last rose above the release
    # level before the onset (the rising edge) to the release
    high = np.any(np.abs(r) >= det.release, axis=1)
    inside = np.zeros(len(t), dtype=bool)
    for e in events:
        k0 = int(np.searchsorted(t, e.onset_time))
        while k0 > 0 and high[k0 - 1]:
            k0 -= 1
        end = e.release_time if e.release_time is not None else np.inf
        inside |= (t >= t[k0]) & (t <= end)
    outside = np.abs(r[~inside])
    max_out = outside.max(axis=0) if outside.size else np.zeros(dyn.n)
    return ResidualRun(np.asarray(t, float), r, flag, events, max_out)


def _write_csv(path: Path, res: ResidualRun) -> None:
    n = res.r.shape[1]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", *[f"r{j + 1}" for j in range(n)], "collision"])
        for t, r, c in zip(res.t, res.r, res.collision):
            w.writerow([f"{t:.6f}", *[f"{x:.6g}" for x in r], int(c)])


def run(args) -> int:
    desc = load_robot(args.robot)
    samples = load_csv(args.data, desc)
    if samples.t is None or samples.dq is None:
        missing = [c for c, v in (("t", samples.t), ("dq1..dqn", samples.dq)) if v is None]
        raise SampleDataError(f"{args.data}: the residual needs columns {' and '.join(missing)} (time stamps and "
                              "joint velocities)")
    n = desc.n
    gains = _floats(args.gain, "--gain", n)
    thresholds = _floats(args.threshold, "--threshold", n)
    payload = _payload(args)
    dyn = RigidBodyDynamics(desc)
    res = run_residual(dyn, samples.t, samples.q, samples.dq, samples.tau, payload, gains, thresholds, args.release)
    if args.out:
        _write_csv(args.out, res)
    if args.json:
        out = res.to_dict()
        out.update(robot=desc.name, data=str(args.data), payload=None if payload is None else payload.to_dict())
        print(json.dumps(out, indent=2))
        return 0
    print(f"robot {desc.name}, {res.t.size} samples over {res.t[-1] - res.t[0]:.3f} s"
          f", payload {'none' if payload is None else f'{payload.mass:.3f} kg at {np.round(payload.com, 4)} m'}")
    print(f"{len(res.events)} collision event(s)")
    for i, e in enumerate(res.events, 1):
        rel = "still active at end" if e.release_time is None else f"released {e.release_time:.3f} s"
        print(f"  {i}: onset {e.onset_time:.3f} s, detected {e.detection_time:.3f} s, peak {e.peak_max:.2f} N m "
              f"on joint {e.peak_joint + 1}, contact on {e.link_name} or beyond, {rel}")
    m = res.max_outside_events
    print("max |r| outside events: " + ", ".join(f"{x:.2f}" for x in m) + f" N m (max {m.max(initial=0.0):.2f})")
    if args.out:
        print(f"residual written to {args.out}")
    return 0
