"""`payload-estimation residual`: run the momentum observer and collision detector over a recorded run."""

from __future__ import annotations

import argparse
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..collision import (
    CALIBRATION_GAP_FRACTION,
    DEFAULT_GAIN,
    MAX_GAIN_STEP,
    THRESHOLD_MINIMUM,
    THRESHOLD_SAFETY,
    CollisionEvent,
    CollisionMonitor,
    JointFriction,
    MonitorConfig,
    ObserverCoverage,
    ThresholdCalibration,
    calibrate_thresholds,
    gain_for_rate,
    identified_friction,
    observer_coverage,
    replay,
    replay_too_short,
)
from ..errors import PayloadEstimationError
from ..files import load_recording, write_table
from ..identification import DynamicModel, load_dynamic_model
from ..model import RigidBodyDynamics, require_masses
from ..payload import PayloadEstimate
from ..signals import derive_velocity
from .command_line import CommandError, input_file, os_reason, output_file
from .recording_input import add_rate_argument, add_torque_gain_argument, load_samples
from .robot_option import add_robot_arguments, robot_from_args

HELP = "momentum-observer residual and collision events of a recorded run (CSV or rosbag2)"

STATIC_HINT = ("static captures (like examples/*_samples.csv) are for `payload-estimation estimate`, "
               "not `residual`")


class ResidualArgumentError(PayloadEstimationError):
    """A command-line value is malformed; the message names the option."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--data", required=True, type=Path,
                        help="recording: CSV (t, q1..qn, [dq1..dqn,] tau1..taun), rosbag2 directory or .db3/.mcap "
                             "file; without velocities they are derived from the positions")
    parser.add_argument("--topic", default="joint_states", help="JointState topic in a rosbag (default joint_states)")
    add_torque_gain_argument(parser)
    add_rate_argument(parser)
    parser.add_argument("--params", default="nominal",
                        help="the observer's dynamic model: a PARAMS.yaml of `identify` (coefficients and their "
                             "friction), an identified robot YAML/URDF (`identify --physical`: link set and its "
                             "friction), or 'nominal' (the --robot description, no friction; the default)")
    parser.add_argument("--coulomb-smoothing", type=float, default=0.02,
                        help="rad/s: the identified Coulomb friction's sign is tanh(dq / this) in the observer "
                             "(default 0.02, the speed below which identify gives Coulomb rows no weight)")
    pay = parser.add_mutually_exclusive_group()
    pay.add_argument("--payload", help="known payload 'm,cx,cy,cz' (kg, m in the payload frame); gravity only")
    pay.add_argument("--payload-file", type=Path, help="payload estimate JSON (`payload-estimation estimate --json`)")
    parser.add_argument("--threshold", default="6", help="detection threshold in N m: one value or one per joint "
                                                         "'t1,...,tn' (default 6, as in Gaz & De Luca, IROS 2017)")
    parser.add_argument("--release", type=float, default=0.5, help="release threshold as a fraction of the "
                                                                  "detection threshold (hysteresis, default 0.5)")
    parser.add_argument("--gain", default=f"{DEFAULT_GAIN:g}",
                        help=f"observer gain K_I in 1/s: one value or one per joint (default {DEFAULT_GAIN:g}); the "
                             f"observer caps it at {MAX_GAIN_STEP:g} x the recording's rate (30 at 100 Hz: "
                             "docs/collision.md)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--out", type=Path, help="write t, r1..rn, collision to this CSV")
    cal = parser.add_argument_group("threshold calibration (a recording of the task's motion without contact)")
    cal.add_argument("--calibrate", action="store_true",
                     help="set the collision monitor's thresholds from this recording's residual: per joint "
                          "max(--minimum, --safety x its largest |r|); refused if --threshold detects anything in it "
                          f"or more than {100 * CALIBRATION_GAP_FRACTION:g}%% of its time were stream gaps the "
                          "observer could not integrate")
    cal.add_argument("--safety", type=float, default=THRESHOLD_SAFETY,
                     help=f"factor over the largest |r| (default {THRESHOLD_SAFETY:g})")
    cal.add_argument("--minimum", type=float, default=THRESHOLD_MINIMUM,
                     help=f"N m, the lowest threshold (default {THRESHOLD_MINIMUM:g}: a margin for what a recording "
                          "does not show; inside a grasp's window the monitor keeps 6 N m)")
    cal.add_argument("--params-out", type=Path,
                     help="write the thresholds as a ROS 2 parameter file for collision_monitor (--params-file)")


def _floats(text: str, option: str, n: int | None = None) -> np.ndarray:
    try:
        values = np.array([float(x) for x in str(text).split(",")])
    except ValueError:
        raise ResidualArgumentError(f"{option}: '{text}' is not a comma-separated list of numbers") from None
    if n is not None and values.size not in (1, n):
        raise ResidualArgumentError(f"{option}: expected 1 or {n} values, got {values.size} ('{text}')")
    return values if values.size > 1 else values[0]


def _rate(t: np.ndarray) -> float:
    """Hz: the median rate of stamps ``t``."""
    step = np.diff(np.asarray(t, float))
    step = step[step > 0]
    return 1.0 / float(np.median(step)) if step.size else 0.0


def _payload(args) -> PayloadEstimate | None:
    if args.payload:
        v = _floats(args.payload, "--payload")
        if np.ndim(v) == 0 or v.size != 4:
            raise ResidualArgumentError(f"--payload: expected 'm,cx,cy,cz' (4 numbers), got '{args.payload}'")
        return PayloadEstimate(float(v[0]), v[1:4].copy(), method="given")
    if args.payload_file:
        path = input_file(args.payload_file, "--payload-file")
        try:
            return PayloadEstimate.from_dict(json.loads(path.read_text()))
        except (KeyError, TypeError, ValueError) as exc:  # ValueError: bad JSON or numbers
            raise ResidualArgumentError(f"--payload-file {args.payload_file}: not a payload estimate ({exc})") from None
    return None


@dataclass(frozen=True)
class ResidualRun:
    """Result of :func:`run_residual`: residual per sample (N x n, N m), collision flag, events; ``gap`` (N,):
    the samples the observer reached over a gap (the residual held over the step before them), ``coverage``
    how much of the run it integrated (:func:`collision.thresholds.observer_coverage`)."""

    t: np.ndarray
    r: np.ndarray
    collision: np.ndarray
    events: list[CollisionEvent]
    max_outside_events: np.ndarray  # per joint, N m
    gap: np.ndarray
    coverage: ObserverCoverage

    def to_dict(self) -> dict:
        return {
            "samples": int(self.t.size),
            "observer_gaps": self.coverage.gaps,
            "observer_gap_time": round(self.coverage.gap_time, 6),
            "events": [e.to_dict() for e in self.events],
            "max_abs_residual_outside_events": [float(x) for x in self.max_outside_events],
            "max_abs_residual_outside_events_overall": float(self.max_outside_events.max(initial=0.0)),
        }


def observer_friction(model: DynamicModel, v_eps: float = 0.02) -> JointFriction | None:
    """The dynamic model's joint friction as the observer's (:func:`collision.observer.identified_friction`)."""
    f = model.friction
    return identified_friction(f.viscous, f.coulomb, f.offset, v_eps)


def run_residual(dyn: RigidBodyDynamics, t, q, dq, tau, payload: PayloadEstimate | None = None, gains=150.0,
                 thresholds=6.0, release_fraction: float = 0.5, friction: JointFriction | None = None
                 ) -> ResidualRun:
    """Collision monitor (observer, detector, contact estimate) over arrays (N samples x n joints); an
    event still active at the end is kept. A payload estimate without inertia enters ĝ only (eq. 48).
    ``dyn``: the unloaded model (e.g. ``load_dynamic_model(...).dynamics()``), ``friction``
    the observer's joint friction (:func:`observer_friction`)."""
    mon = CollisionMonitor(dyn, MonitorConfig(gains=gains, thresholds=thresholds, release_fraction=release_fraction),
                           friction=friction)
    if payload is not None:
        mon.set_payload(payload.body(), gravity_only=payload.inertia is None)
    r, flag, gap = replay(mon, t, q, dq, tau)
    events = mon.events()
    det = mon.detector
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
    t = np.asarray(t, float)
    return ResidualRun(t, r, flag, events, max_out, gap, observer_coverage(t, gap, mon.observer.max_gap))


def _write_csv(path: Path, res: ResidualRun) -> None:
    n = res.r.shape[1]
    try:
        write_table(path, ["t", *[f"r{j + 1}" for j in range(n)], "collision"],
                    np.column_stack([res.t, res.r, res.collision.astype(float)]), time_column=True)
    except OSError as exc:
        raise CommandError(f"--out {path}: {os_reason(exc)}") from None


def _contact_text(e: CollisionEvent) -> str:
    """One line: link (exact or ambiguous), force and point, as far as they are known."""
    c = e.contact
    if c is None or c.link == 0:
        return f"contact on {e.link_name} or beyond (no contact estimate)"
    link = f"contact on {c.link_name}" + (f" (ambiguous, p = {max(c.link_probabilities):.2f})"
                                          if c.link_ambiguous else "")
    fit = np.round(c.force, 1).tolist()
    if e.force is not None:
        force = f"force {fit} N (|F| {c.force_norm:.1f} N, base frame)"
    else:
        force = f"force ambiguous: |F| {c.force_range[0]:.0f}..{c.force_range[1]:.0f} N (best fit {fit} N)"
    point = "point not observable" if c.point is None else f"at {np.round(c.point, 3).tolist()} m"
    return f"{link}, {force}, {point}"


def run(args) -> int:
    # the arguments and the output paths first: a mistake in them must not cost the computation
    if args.params_out and not args.calibrate:
        raise ResidualArgumentError("--params-out writes calibrated thresholds: add --calibrate")
    if args.out:
        output_file(args.out, "--out")
    if args.params_out:
        output_file(args.params_out, "--params-out")
    desc = robot_from_args(args)
    if args.params in (None, "nominal"):
        require_masses(desc, "the collision residual against the robot description (no --params)")
    n = desc.n
    thresholds = _floats(args.threshold, "--threshold", n)
    payload = _payload(args)
    if not args.coulomb_smoothing > 0:
        raise ResidualArgumentError(f"--coulomb-smoothing must be > 0 rad/s, got {args.coulomb_smoothing}")
    samples = load_samples(args.data, desc, args, out=io.StringIO() if args.json else sys.stdout,
                           loader=load_recording)
    samples, note = derive_velocity(samples, str(args.data))
    gains = _floats(args.gain, "--gain", n)
    if (short := replay_too_short(samples.t, gains)) is not None:
        raise ResidualArgumentError(f"{args.data}: {short}; record the arm's motion at the joint-state stream's rate")
    rate = _rate(samples.t)
    if not args.json:
        if note:
            print(f"  {note}")
        if np.any(gains > MAX_GAIN_STEP * rate):
            print(f"observer gain {gain_for_rate(rate, float(np.max(gains))):.3g}/s: --gain {args.gain} capped at "
                  f"{MAX_GAIN_STEP:g} x the recording's {rate:.0f} Hz (a higher gain passes each step's velocity "
                  "error straight into the residual)")
    model = load_dynamic_model(args.params, desc)
    if not args.json:
        print(model.note)
    dyn = model.dynamics()
    res = run_residual(dyn, samples.t, samples.q, samples.dq, samples.tau, payload, gains, thresholds, args.release,
                       observer_friction(model, args.coulomb_smoothing))
    why = res.coverage.refusal()
    if why is not None:
        raise ResidualArgumentError(f"{args.data}: {why}; {STATIC_HINT}")
    if (warning := res.coverage.warning()) is not None:
        print(f"payload-estimation residual: warning: {warning}", file=sys.stderr)
    if args.out:
        _write_csv(args.out, res)
    cal = _calibration(args, res, samples.dq) if args.calibrate else None
    if args.json:
        out = res.to_dict()
        out.update(robot=desc.name, data=str(args.data), params=model.source, dynamic_model=model.kind,
                   friction=model.friction.to_dict(),
                   payload=None if payload is None else payload.to_dict())
        if cal is not None:
            out["calibration"] = cal.to_dict()
        print(json.dumps(out, indent=2))
        return 0
    print(f"robot {desc.name}, {res.t.size} samples over {res.t[-1] - res.t[0]:.3f} s"
          f", payload {'none' if payload is None else f'{payload.mass:.3f} kg at {np.round(payload.com, 4)} m'}")
    print(f"{len(res.events)} collision event(s)")
    for i, e in enumerate(res.events, 1):
        rel = "still active at end" if e.release_time is None else f"released {e.release_time:.3f} s"
        print(f"  {i}: onset {e.onset_time:.3f} s, detected {e.detection_time:.3f} s, peak {e.peak_max:.2f} N m "
              f"on joint {e.peak_joint + 1}, {rel}\n     {_contact_text(e)}")
    m = res.max_outside_events
    print("max |r| outside events: " + ", ".join(f"{x:.2f}" for x in m) + f" N m (max {m.max(initial=0.0):.2f})")
    if (hint := _nominal_hint(args, res, thresholds)) is not None:
        print(hint)
    if args.out:
        print(f"residual written to {args.out}")
    if cal is not None:
        print("\n".join(cal.lines(desc.joint_names)))
        th = ", ".join(f"{x:.2f}" for x in cal.thresholds)
        print(f"collision_monitor: thresholds:=[{th}]"
              + (f" (parameter file {args.params_out}: --ros-args --params-file {args.params_out})"
                 if args.params_out else " (--params-out FILE writes them as a parameter file)"))
    return 0


def _nominal_hint(args, res: ResidualRun, thresholds: np.ndarray) -> str | None:
    """What to read into events or a residual above half the thresholds when the observer ran on the nominal
    description (None: an identified model, or a residual well below the thresholds)."""
    if args.params not in (None, "nominal"):
        return None
    if not res.events and not np.any(res.max_outside_events > 0.5 * thresholds):
        return None
    return ("note: the observer ran on the robot description's nominal dynamics (no --params, no friction): on a "
            "real arm events and residuals of this size are often that model's own error, not contacts. Identify "
            "the arm on a contact-free recording (payload-estimation identify --data FILE ...) and replay with "
            "--params PARAMS.yaml")


def _calibration(args, res: ResidualRun, dq: np.ndarray) -> ThresholdCalibration:
    """Thresholds from a contact-free run, refused when the run's own detection saw something (a contact, or a
    model too far off for the thresholds it was run with); the parameter file written if asked."""
    if res.events:
        e = res.events[0]
        raise ResidualArgumentError(
            f"--calibrate: the recording is not contact-free at --threshold {args.threshold} N m: {len(res.events)} "
            f"event(s), the first detected at {e.detection_time:.3f} s (peak {e.peak_max:.2f} N m on joint "
            f"{e.peak_joint + 1}). Calibrate on the task's motion without contact; if there was none, the model "
            "misses that much (identify the arm: payload-estimation identify, then --params)")
    cal = calibrate_thresholds(res.t, res.r, dq, args.safety, args.minimum, gap=res.gap,
                               max_gap=res.coverage.max_gap)
    if args.params_out:
        try:
            Path(args.params_out).write_text(cal.params_file(str(args.data)))
        except OSError as exc:
            raise CommandError(f"--params-out {args.params_out}: {os_reason(exc)}") from None
    return cal
