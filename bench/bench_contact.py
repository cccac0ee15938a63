"""Contact link and force you can act on (issue 31): random contacts on links 2..n, at rest and moving.

Ground truth: the MuJoCo simulated arm (as bench_collision.py: 0.1 N m torque noise, true links 3 % off
the model, a 3 kg payload the monitor knows only by its static estimate). Per contact: a random link
2..n, a random exposed point of its capsule surface, a force of 20-80 N within 40° of the inward normal
(random direction in that cone), for 0.15 s, with the arm at rest or in the middle of a random leg
(peak speed 10-50 % of the velocity limits); the arm is stopped at the detection as the node does.
The detection runs once (CollisionMonitor); each variant's ContactTracker (the current
collision/contact.py and the one of ``--before REV``) sees the same samples.

Scores per variant: link wrong without the ambiguity flag; force within 20 % among the contacts that
carry neither flag; among the flagged ones, a force range that contains the truth; among contacts
whose reported link has probability >= 0.9, the fraction right.
Usage (from the repository root):
  nice -n 10 .venv/bin/python bench/bench_contact.py [--count N] [--before REV] [--write]
--write replaces the section of docs/bench/collision.md that starts with SECTION (else prints only).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import inspect
import math
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bench_collision import (
    CONTACT_SECTION,
    MIN_TORQUE,
    MODEL_ERROR,
    NOISE,
    PAYLOAD,
    Q0,
    SPREAD,
    make_arm,
    static_estimate,
)
from benchlib import BENCH_DOCS, machine

from payload_estimation.collision import CollisionMonitor, MonitorConfig
from payload_estimation.collision import contact as contact_now
from payload_estimation.collision.geometry import distance_to_segment, sample_surface
from payload_estimation.model import RigidBodyDynamics, load_robot
from payload_estimation.model.parameters import BodyInertia
from payload_estimation.reporting import format_table
from payload_estimation.sampling import stop_point

ROBOTS = ("lwr4", "iiwa14")
LINKS = (2, 7)  # first and last link that gets contacts
FORCE_RANGE = (20.0, 80.0)  # N
CONE_DEG = 40.0  # force within this angle of the inward normal
SPEED = (0.1, 0.5)  # peak speed of a moving leg, fraction of the velocity limits
CONTACT_TIME = 0.15  # s
INSIDE = (0.03, 0.06)  # m from the link's axis: half the contacts lie inside the capsule model (issue 46), as a
# real link's surface does not follow the estimator's capsules
MAX_LEG = 2.0  # s: longer legs are shortened (same speed, less travel)
FORCE_TOL = 0.20  # relative |F| error that counts as right
P_CONFIDENT = 0.9
SECTION = CONTACT_SECTION
DEFAULT_BEFORE = "7e7ba8a"  # contact.py as of issue 19 (before issue 31)


def load_contact_module(rev: str):
    """collision/contact.py as of git revision ``rev``, imported as a module of the package."""
    src = subprocess.run(["git", "show", f"{rev}:payload_estimation/collision/contact.py"], check=True,
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent).stdout
    path = Path(tempfile.mkdtemp()) / "contact_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("payload_estimation.collision._contact_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@dataclass
class Trial:
    robot: str
    moving: bool
    link: int
    force: float  # N, true magnitude
    detected: bool
    est: dict  # variant -> ContactEstimate or None
    q: np.ndarray | None = None  # rad, at the first variant's estimate
    point: np.ndarray | None = None  # m, link frame (truth)
    f: np.ndarray | None = None  # N, base frame (truth)


def start_leg(desc, arm, rng: np.random.Generator, frac: float) -> float:
    """A random rest-to-rest leg towards a pose around Q0, at most MAX_LEG s long (shortened towards it),
    at a peak speed of ``frac`` x the velocity limits; its duration (s)."""
    lo, hi = 0.85 * desc.limits.position[:, 0], 0.85 * desc.limits.position[:, 1]
    q = arm.state().q
    target = np.clip(Q0[desc.name] + rng.uniform(-1, 1, desc.n) * SPREAD, lo, hi)
    dur = max(0.6, float(np.max(1.875 * np.abs(target - q) / (frac * desc.limits.velocity))))
    if dur > MAX_LEG:
        target = q + (target - q) * MAX_LEG / dur
        dur = MAX_LEG
    arm.set_trajectory([(dur, target, None)])
    return dur


def draw(loc, dyn, q: np.ndarray, rng: np.random.Generator, surfaces) -> tuple | None:
    """(link, point in the link frame, force N base) of a random contact, None below MIN_TORQUE."""
    poses = loc.link_poses(q)
    segs = [(p[:3, :3] @ c.a + p[:3, 3], p[:3, :3] @ c.b + p[:3, 3], c.radius)
            for p, c in zip(poses, loc.geometry.capsules)]
    k = int(rng.integers(LINKS[0], LINKS[1] + 1))
    surf = surfaces[k - 1]
    rot, pos = poses[k - 1][:3, :3], poses[k - 1][:3, 3]
    for _ in range(1000):
        i = int(rng.integers(len(surf.area)))
        p_w = rot @ surf.points[i] + pos
        if all(distance_to_segment(p_w[None], a, b)[0] >= r for j, (a, b, r) in enumerate(segs) if j != k - 1):
            break
    else:
        return None
    nrm = rot @ surf.normals[i]
    point = surf.points[i]
    if rng.uniform() < 0.5:  # inside the capsule: the same direction from the axis, 3-6 cm from it
        point = point - (loc.geometry.capsules[k - 1].radius - rng.uniform(*INSIDE)) * surf.normals[i]
    v = rng.normal(size=3)
    v -= (v @ nrm) * nrm
    v /= np.linalg.norm(v)
    ang = math.acos(1.0 - rng.uniform() * (1.0 - math.cos(math.radians(CONE_DEG))))
    f = rng.uniform(*FORCE_RANGE) * (-math.cos(ang) * nrm + math.sin(ang) * v)
    tau = dyn.frame_jacobian(q, f"link_{k}", point)[:3].T @ f
    return (k, point, f) if np.abs(tau).max() >= MIN_TORQUE else None


def payload_covariance(mass: float, com, sigma_mass: float, sigma_com: float) -> np.ndarray:
    """4 x 4 covariance (kg, kg m) of (m, m c) for independent errors σ ``sigma_mass`` kg and ``sigma_com`` m per
    CoM component around ``mass`` kg, ``com`` m (first order)."""
    jac = np.zeros((4, 4))
    jac[0, 0] = 1.0
    jac[1:, 0] = com
    jac[1:, 1:] = mass * np.eye(3)
    return jac @ np.diag([sigma_mass ** 2] + [sigma_com ** 2] * 3) @ jac.T


def run_robot(name: str, count: int, seed: int, variants: dict, payload_error: float = 0.0,
              payload_sigma: float | None = None) -> tuple[list[Trial], int]:
    """``count`` contacts (alternately at rest and moving); the trials and the weak draws redrawn. ``payload_error``:
    the monitor's payload off by this fraction of its mass and this x 0.1 m on every CoM component (as an online
    estimate early in a move can be); ``payload_sigma``: the σ the trackers are given for it in the same units
    (None: ``payload_error``, i.e. the error is 1 σ per component; 0: none)."""
    desc = load_robot(name)
    dyn = RigidBodyDynamics(desc)
    est = static_estimate(desc, dyn)
    arm = make_arm(desc, seed)
    rng = np.random.default_rng(seed)
    mon = CollisionMonitor(dyn, MonitorConfig(torque_noise=NOISE, contact=None))
    rel = payload_error if payload_sigma is None else payload_sigma
    cov = payload_covariance(est.mass, est.com, rel * est.mass, rel * 0.1) if rel else None
    if payload_error:
        est = BodyInertia(est.mass * (1 + payload_error), est.com + payload_error * np.array([0.1, -0.1, 0.1]),
                          est.inertia_com)
    mon.set_payload(est)
    trackers = {v: mod.ContactTracker(mod.ContactLocator(dyn, config=mod.ContactConfig(**kw)))
                for v, (mod, kw) in variants.items()}
    takes_dq = {v: "dq" in inspect.signature(tr.update).parameters for v, tr in trackers.items()}
    for tr in trackers.values():
        tr.payload_covariance = cov  # the payload's σ as the monitor has it (a tracker before issue 46 ignores it)
    loc = next(iter(trackers.values())).locator
    surfaces = [sample_surface(c, 0.005) for c in loc.geometry.capsules]
    trials: list[Trial] = []
    weak = 0

    def run_for(seconds, on_step=None):
        for s in arm.run(seconds):
            step = mon.update(s.t, s.q, s.dq, s.tau)
            got = {v: tr.update(s.t, s.q, mon.observer.disturbance, mon.detector.current,
                                **({"dq": s.dq} if takes_dq[v] else {}))
                   for v, tr in trackers.items()}
            if on_step is not None:
                on_step(s, step, got)

    while len(trials) < count:
        moving = len(trials) % 2 == 1
        dur = start_leg(desc, arm, rng, rng.uniform(*SPEED) if moving else SPEED[1])
        if moving:
            run_for(rng.uniform(0.35, 0.65) * dur)
        else:
            run_for(dur + 0.3)
        drawn = draw(loc, dyn, arm.state().q, rng, surfaces)
        if drawn is None:
            weak += 1
            while not arm.trajectory_done:
                run_for(0.05)
            continue
        k, p_link, f = drawn
        arm.apply_contact(f"link_{k}", f, p_link, duration=CONTACT_TIME)
        out = {"det": False, "est": {v: None for v in variants}, "q": None}

        def watch(s, step, got, out=out):
            if step.event is not None and step.event.active and not out["det"]:
                out["det"] = True
                q_stop, t_stop = stop_point(desc, s.q, s.dq, 10.0, 0.2)
                arm.set_trajectory([(t_stop, q_stop, None)])
            for v, c in got.items():
                if c is not None and out["est"][v] is None:
                    out["est"][v] = c
                    out["q"] = s.q

        run_for(CONTACT_TIME + 0.3, watch)
        trials.append(Trial(name, moving, k, float(np.linalg.norm(f)), out["det"], out["est"], out["q"], p_link, f))
        while not arm.trajectory_done:
            run_for(0.05)
        run_for(0.2)
    return trials, weak


def score(trials: list[Trial], variant: str) -> list:
    """One table row: the issue's scores over ``trials`` for ``variant``."""
    det = [t for t in trials if t.detected]
    est = [(t, t.est[variant]) for t in det if t.est[variant] is not None and t.est[variant].link > 0]
    wrong_unflagged = sum(c.link != t.link and not c.link_ambiguous for t, c in est)
    exact = sum(c.link == t.link for t, c in est)
    clean = [(t, c) for t, c in est if not (c.link_ambiguous or c.force_ambiguous) and c.force is not None]
    flagged = [(t, c) for t, c in est if (t, c) not in clean]
    good_f = sum(abs(c.force_norm - t.force) <= FORCE_TOL * t.force for t, c in clean)
    clean_in = sum(c.force_range[0] <= t.force <= c.force_range[1] for t, c in clean)
    in_range = sum(c.force_range[0] <= t.force <= c.force_range[1] for t, c in flagged)
    conf = [(t, c) for t, c in est if c.link_probabilities[c.link - 1] >= P_CONFIDENT]
    conf_right = sum(c.link == t.link for t, c in conf)
    said = sum(bool(getattr(c, "misfit", "")) for _, c in est)  # issue 46: "no single point contact explains..."
    pct = lambda a, b: f"{a}/{b} ({100 * a / b:.0f} %)" if b else "-"  # noqa: E731
    return [len(trials), len(det), len(est), pct(exact, len(est)), wrong_unflagged, pct(good_f, len(clean)),
            pct(clean_in, len(clean)), pct(in_range, len(flagged)), pct(conf_right, len(conf)), said]


HEADERS = ("robot", "arm", "variant", "contacts", "detected", "estimated", "exact link", "wrong link, not flagged",
           "unflagged: abs(F) within 20 %", "unflagged: range contains abs(F)", "flagged: range contains abs(F)",
           "p >= 0.9: link right", "said: does not fit")


def table(all_trials: dict, variants: list[str], labels: dict) -> str:
    rows = []
    for name, trials in all_trials.items():
        for arm_label, sel in (("at rest", [t for t in trials if not t.moving]),
                               ("moving", [t for t in trials if t.moving]), ("all", trials)):
            for v in variants:
                rows.append([name, arm_label, labels[v]] + score(sel, v))
    return format_table(HEADERS, rows, "lll" + "r" * 10, pad=False)


def per_link(all_trials: dict, variant: str) -> str:
    rows = []
    for name, trials in all_trials.items():
        for k in range(LINKS[0], LINKS[1] + 1):
            sel = [t for t in trials if t.link == k]
            if sel:
                rows.append([name, k] + score(sel, variant))
    return format_table(("robot", "true link") + HEADERS[3:], rows, "lr" + "r" * 10, pad=False)


BINS = (0.0, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0 + 1e-9)


def reliability(all_trials: dict, variants: list[str], labels: dict) -> str:
    """Link probability of the reported link, binned, against the fraction right (both robots); and how
    wide the flagged force ranges are."""
    rows = []
    for v in variants:
        est = [(t, t.est[v]) for ts in all_trials.values() for t in ts
               if t.detected and t.est[v] is not None and t.est[v].link > 0]
        cells = []
        for lo, hi in zip(BINS[:-1], BINS[1:]):
            sel = [(t, c) for t, c in est if lo <= c.link_probabilities[c.link - 1] < hi]
            right = sum(c.link == t.link for t, c in sel)
            cells.append(f"{right}/{len(sel)}" if sel else "-")
        flagged = [(t, c) for t, c in est if c.link_ambiguous or c.force_ambiguous or c.force is None]
        unflagged_link = [c for _, c in est if not c.link_ambiguous]
        open_ = sum(not math.isfinite(c.force_range[1]) for _, c in flagged)
        width = [(c.force_range[1] - c.force_range[0]) / t.force for t, c in flagged if math.isfinite(c.force_range[1])]
        rows.append([labels[v]] + cells + [len(unflagged_link), f"{open_}/{len(flagged)}",
                                           f"{100 * np.median(width):.0f} %" if width else "-"])
    heads = [f"p in [{lo:.2f}, {min(hi, 1.0):.2f}{']' if hi > 1 else ')'}: right"
             for lo, hi in zip(BINS[:-1], BINS[1:])]
    return format_table(["variant"] + heads + ["link not flagged", "flagged: range open above",
                                               "flagged, bounded: median range width / abs(F)"],
                        rows, "l" + "r" * (len(heads) + 3), pad=False)


END = "<!-- bench_contact.py: end of the generated tables; what follows is written by hand and kept -->"


def write_doc(text: str) -> Path:
    """Replace (or append) SECTION of docs/bench/collision.md with ``text``, up to :data:`END`: the readings and
    subsections written after it are kept."""
    path = BENCH_DOCS / "collision.md"
    old = path.read_text() if path.exists() else ""
    head = old.split(SECTION)[0].rstrip("\n")
    tail = old.split(END, 1)[1].lstrip("\n") if END in old else ""
    path.write_text((head + "\n\n" if head else "") + text.rstrip("\n") + f"\n\n{END}\n\n" + tail)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200, help="contacts per robot (half at rest, half moving)")
    ap.add_argument("--before", default=DEFAULT_BEFORE, help="git revision of the 'before' contact.py ('' for none)")
    ap.add_argument("--robots", default=",".join(ROBOTS))
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--write", action="store_true", help="write the section into docs/bench/collision.md")
    ap.add_argument("--dump", default="", help="pickle the trials (truth, q, estimates) to this file")
    ap.add_argument("--payload-error", type=float, default=0.0,
                    help="the monitor's payload off by this fraction of its mass and x 0.1 m per CoM component")
    ap.add_argument("--payload-sigma", type=float, default=None,
                    help="the payload's σ the contact trackers are given, in --payload-error's units (default: that "
                         "error, 1 σ per component; 0: none)")
    ap.add_argument("--load", nargs="*", default=[], help="make the tables from these --dump files (runs nothing)")
    args = ap.parse_args()
    variants = {"after": (contact_now, {})}
    labels = {"after": "now"}
    if args.before:
        variants = {"before": (load_contact_module(args.before), {}), **variants}
        labels["before"] = f"before ({args.before})"

    all_trials, weak, wall = {}, {}, {}
    for dump in args.load:
        with open(dump, "rb") as fh:
            got = pickle.load(fh)
        all_trials |= got["trials"]
        weak |= got["weak"]
        wall |= got["wall"]
    for name in ([] if args.load else args.robots.split(",")):
        t1 = time.monotonic()
        all_trials[name], weak[name] = run_robot(name, args.count, args.seed, variants, args.payload_error,
                                                      args.payload_sigma)
        wall[name] = time.monotonic() - t1
    cmd = "nice -n 10 .venv/bin/python bench/bench_contact.py" + (f" --count {args.count}" if args.count != 200
                                                                   else "") + " --write"
    lines = [SECTION, "",
             f"- machine: {machine()}", f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
             f"- command: `{cmd}`" + (" (or one process per robot with `--robots NAME --dump FILE`, then "
                                      "`--load FILE ... --write`)" if args.load else ""),
             "- wall time: " + ", ".join(f"{n} {s:.0f} s" for n, s in wall.items()),
             f"- {args.count} contacts per robot, half with the arm at rest, half during a leg at a peak speed of "
             f"{100 * SPEED[0]:.0f}-{100 * SPEED[1]:.0f} % of the velocity limits; a random link "
             f"{LINKS[0]}..{LINKS[1]}, "
             f"a random exposed point of its capsule (half of them moved inside it, {100 * INSIDE[0]:.0f}-"
             f"{100 * INSIDE[1]:.0f} cm from the link's axis: a real link's surface is not the capsule), "
             f"{FORCE_RANGE[0]:.0f}-{FORCE_RANGE[1]:.0f} N within "
             f"{CONE_DEG:.0f}° of the inward normal, {CONTACT_TIME} s; MuJoCo, {NOISE} N m torque noise, links "
             f"{100 * MODEL_ERROR:.0f} % off the model, {PAYLOAD.mass} kg payload known by its static estimate; the "
             "arm is stopped at the detection. Draws whose largest joint torque is below "
             f"{MIN_TORQUE:.0f} N m (1.5 x the threshold: not detectable) are redrawn: "
             + ", ".join(f"{n} {w}" for n, w in weak.items()) + ".",
             "- 'unflagged': neither `link_ambiguous` nor `force_ambiguous` (the force a user may act on); "
             "'flagged': either; 'p': `link_probabilities` of the reported link. Targets (issue 31): wrong "
             "and not flagged 0; unflagged within 20 % >= 90 %; flagged range contains abs(F) >= 95 %; p >= 0.9 "
             "right >= 90 %; issue 46: unflagged range contains abs(F) >= 95 %, on points inside the capsule too.",
             ("- 'before' is collision/contact.py of the named commit (the sections above this one were measured "
              "with it: σ 0.2 N m + 3 %, link flagged when another link's evidence is >= 0.25 x the best, range "
              "over the best link's points only); 'now' the current one, on the same samples."
              if args.before == DEFAULT_BEFORE else
              f"- 'before' is collision/contact.py of {args.before} (issue 46's baseline: no misfit check); 'now' "
              "the current one, on the same samples."),
             "- 'said: does not fit' (issue 46): estimates whose best single point contact is worse than a fitting "
             "contact gets once in 1000 (χ² above the 99.9 % quantile for ν = n - 5): σ widened by what the "
             "unexplained part can explain, the force flagged, the words in `ContactEstimate.misfit` and the "
             "summary.", "",
             table(all_trials, list(variants), labels), "",
             "Link probability of the reported link against the fraction right (both robots, all contacts) and the "
             "width of the flagged force ranges (an open range: more than 2.5 % of the posterior lies on points "
             "where neither the joints nor the friction cone bound the force). Limits of this bench: half the true "
             "points lie on the estimator's own capsules, the forces within 40° of the normal (the estimator "
             "assumes 45°); a real arm's surface differs from the capsules in more ways than depth. Link 2 gets "
             "few contacts because "
             "most pushes there stay below the detectable torque.", "",
             reliability(all_trials, list(variants), labels), "",
             "Per true link (now):", "", per_link(all_trials, "after"), ""]
    if args.dump:
        with open(args.dump, "wb") as fh:
            pickle.dump({"trials": all_trials, "weak": weak, "wall": wall}, fh)
    text = "\n".join(lines)
    print(text)
    if args.write:
        print(f"written to {write_doc(text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
