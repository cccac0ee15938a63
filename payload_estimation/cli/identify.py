"""`payload-estimation identify`: identify the unloaded robot from a recording (paper 003, paper 001).

Periodic excitation (``--trajectory TRAJ.trajectory.json`` from `excite`, or ``--period``/``--harmonics``):
period averaging, frequency-domain differentiation, Butterworth-filtered torque. Otherwise the
recording is resampled to a uniform grid (real loggers' stamps jitter and skip), low-passed and
differentiated. By default the coefficients written are those of a physically consistent link set
fitted to the least-squares coefficients, with the friction terms (``--friction auto``) and the
coefficients' sigma chosen by cross-validation across time blocks
(:mod:`..identification.consistent_identification`); ``--unconstrained`` (or ``--essential``) writes
the plain least-squares coefficients instead (friction by BIC on the training residual).
``--gravity-only``: static samples -> gravity coefficients. ``--physical``: also write the physically
consistent link parameters (eqs. 15-18) as OUT_robot.yaml (package robot schema, with the identified
friction) and OUT_robot.urdf. ``--hold-out F``: fit on the first 1 - F of the recording and print the
torque error of every model on the rest.
"""

from __future__ import annotations

import argparse
import os

from ..model import FINGERPRINT_KEY, kinematics_fingerprint
from .command_line import CommandError, output_file
from .recording_input import add_data_arguments, load_samples
from .robot_option import add_robot_arguments, robot_from_args

HELP = "identify the robot's dynamic coefficients (and physically consistent link parameters) from a recording"


def add_resampling_arguments(parser: argparse.ArgumentParser) -> None:
    """--velocity, --rate, --max-gap: how a real recording becomes filtered, uniform samples."""
    parser.add_argument("--velocity", choices=("auto", "positions", "recorded"), default=None,
                        help="velocities from differentiated positions, the recorded dq, or auto (recorded when the "
                             "recording has them; default; validate: as the model was identified)")
    parser.add_argument("--rate", type=float, default=None,
                        help="resample irregular stamps to this rate in Hz (default: the recording's median rate); "
                             "a recording without time stamps: the rate its rows were logged at (lost states found)")
    parser.add_argument("--max-gap", type=float, default=0.05,
                        help="longest gap (s) bridged by interpolation; longer gaps split the recording (default 0.05)")
    parser.add_argument("--hold-out", type=float, default=None, metavar="FRACTION",
                        help="hold out the last FRACTION of the recording by time (e.g. 0.3)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    add_data_arguments(parser)
    parser.add_argument("--trajectory", help="trajectory file written by `excite` (periodic processing, alignment)")
    parser.add_argument("--period", type=float, help="excitation period in s (without --trajectory)")
    parser.add_argument("--harmonics", type=int, help="excited harmonics L (with --period)")
    parser.add_argument("--start", type=float, default=None,
                        help="time (s, recording clock) where the first period starts (default: found by matching "
                             "the trajectory, or the first sample)")
    parser.add_argument("--skip-periods", type=int, default=0, help="periods to discard at the start (transients)")
    parser.add_argument("--torque-cutoff", type=float, default=6.0, help="torque low-pass cut-off Hz (default 6)")
    parser.add_argument("--friction", nargs="?", const="viscous+coulomb", default="auto", metavar="MODEL",
                        help="friction terms per joint: auto (chosen by cross-validation, default; with "
                             "--unconstrained: by the data's residual), none, or "
                             "terms of viscous, coulomb, offset joined by '+'; --friction alone = viscous+coulomb. "
                             "With --gravity-only: offset (a torque offset per joint, the default) or none")
    parser.add_argument("--unconstrained", action="store_true",
                        help="write the plain least-squares coefficients (best on the recorded motion, often worse "
                             "on other motions) instead of those of a physically consistent link set")
    parser.add_argument("--essential", action="store_true",
                        help="keep only the essential least-squares coefficients (implies --unconstrained)")
    parser.add_argument("--min-abs", type=float, default=0.01, help="essential: |coefficient| threshold")
    parser.add_argument("--max-rsd", type=float, default=40.0, help="essential: RSD threshold in %%")
    parser.add_argument("--gravity-only", action="store_true", help="gravity coefficients from static samples")
    parser.add_argument("--max-speed", type=float, default=0.01,
                        help="gravity-only: samples faster than this (rad/s) are not static and are dropped")
    parser.add_argument("--physical", action="store_true",
                        help="also write the physically consistent link parameters as robot files")
    parser.add_argument("--starts", type=int, default=5, help="consistent fit: number of multi-start runs (default 5)")
    parser.add_argument("--prior-weight", type=float, default=None,
                        help="consistent fit: weight of the prior towards the nominal link parameters (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    add_resampling_arguments(parser)
    parser.add_argument("--out", required=True, help="PARAMS.yaml output path")


def _friction_spec(text: str):
    from ..identification import friction_terms

    if text != "auto":
        friction_terms(text)  # validates
    return text


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    output_file(args.out, "--out")  # before the fit: a mistyped path must not cost it
    from pathlib import Path

    import numpy as np

    from ..files import read_trajectory_file
    from ..identification import (
        IdentificationError,
        IdentificationOptions,
        fit_coefficients,
        identify_gravity,
        preprocess,
    )
    from ..model import has_masses
    from ..signals import periodic_rate, select_static, split_by_time

    desc = robot_from_args(args)
    if not has_masses(desc) and (args.physical or not (args.unconstrained or args.essential or args.gravity_only)):
        raise CommandError(f"robot '{desc.name}' has no link masses: the physically consistent fit (identify's "
                           "default, --physical) starts from them; identify its coefficients by least squares "
                           "(--unconstrained), which needs none")
    samples = load_samples(args.data, desc, args, stamps="captures" if args.gravity_only else "required")
    out = Path(args.out)
    held = consistent = None
    if args.hold_out is not None:
        samples, held = split_by_time(samples, args.hold_out)
        print(f"fitting on t = {samples.t[0]:.3f}..{samples.t[-1]:.3f} s; holding out t = {held.t[0]:.3f}.."
              f"{held.t[-1]:.3f} s (last {args.hold_out:.0%})")
    if args.gravity_only:
        if args.friction not in ("auto", "none", "offset") or args.physical:
            raise CommandError("--gravity-only takes --friction offset (the default), none, or nothing else, and "
                               "no --physical: a static robot has no friction to fit, only sensor offsets")
        if samples.dq is not None or samples.t is not None:
            samples = select_static(samples, args.max_speed)
        model = identify_gravity(desc, samples, essential=args.essential, min_abs=args.min_abs,
                                 max_rsd=args.max_rsd, offset=args.friction != "none")
        data = opts = None
    else:
        period = harmonics = q_des = None
        if args.trajectory:
            names, _, four = read_trajectory_file(args.trajectory)
            if four is None:
                raise CommandError(f"{args.trajectory}: no 'excitation' record; pass --period and --harmonics")
            if tuple(names) != tuple(desc.joint_names):
                raise CommandError(f"{args.trajectory}: joints {list(names)} differ from robot '{desc.name}' "
                                   f"{list(desc.joint_names)}")
            period, harmonics = four.period, four.harmonics
            fs = periodic_rate(samples, period)
            q_des = four.evaluate(np.arange(int(round(period * fs))) / fs)[0]
        elif args.period is not None:
            if args.harmonics is None:
                raise CommandError("--period needs --harmonics (the excitation's L)")
            period, harmonics = args.period, args.harmonics
        start_index = None
        if args.start is not None:
            if samples.t is None:
                raise CommandError("--start needs time stamps in the recording")
            start_index = int(np.searchsorted(samples.t, args.start))
        elif period is not None and q_des is None:
            start_index = 0
        opts = IdentificationOptions(friction=_friction_spec(args.friction), essential=args.essential,
                                     min_abs=args.min_abs, max_rsd=args.max_rsd, torque_cutoff=args.torque_cutoff,
                                     skip_periods=args.skip_periods, velocity=args.velocity or "auto",
                                     rate=args.rate, max_gap=args.max_gap)
        try:
            data = preprocess(samples, opts, period, harmonics, q_des, start_index)
            print(f"preprocessing: {data.describe()}")
            if data.velocity_check is not None:
                used = "used" if data.velocity == "recorded" else "not used (--velocity positions)"
                print(f"velocities: {data.velocity_check.describe()}; recorded dq {used}")
            if args.unconstrained or args.essential:
                model = fit_coefficients(desc, data, opts)
            else:
                consistent = _consistent(args, desc, data, opts)
                model = consistent.least_squares if consistent.rejected else consistent.model
        except IdentificationError as exc:
            raise IdentificationError(f"{args.data}: {exc}") from exc
        if consistent is None:
            _print_friction_choice(model)
    model.info["data"] = str(args.data)
    model.info[FINGERPRINT_KEY] = kinematics_fingerprint(desc)  # a node checks the file belongs to its model
    _print_model(desc, model)
    if consistent is not None:
        _print_consistent(consistent)
        _flag_poor_fit(consistent.least_squares_cv_rms if consistent.rejected else consistent.cv_rms,
                       "cross-validated on the recording")
    physical = None
    if args.physical:
        physical = _physical(args, desc, model, data, opts, out, consistent)
    model.save(out)
    print(f"wrote {out}")
    if held is not None and data is not None:
        _print_hold_out(desc, model, physical, held, args)
    return 0


def _consistent(args, desc, data, opts):
    """The physically consistent fit (friction and sigma by cross-validation); the prior's projection said."""
    from ..identification import PRIOR_WEIGHT, consistent_prior, identify_consistent

    prior = consistent_prior(desc)
    if prior.changed:
        print(f"prior: {prior.describe(str(args.robot))}")
    weight = PRIOR_WEIGHT if args.prior_weight is None else args.prior_weight
    return identify_consistent(desc, data, opts, prior_weight=weight, starts=args.starts, seed=args.seed)


def _flag_poor_fit(rms: float, how: str) -> None:
    """A model that misses its data by more than POOR_FIT_RMS is said loudly (stderr), never written quietly."""
    import sys

    from ..identification import POOR_FIT_RMS

    if rms > POOR_FIT_RMS:
        print(f"payload-estimation identify: WARNING: the written model misses held-out torque by {rms:.2f} N m RMS "
              f"({how}; more than {POOR_FIT_RMS:g} N m): check the torque's sign and gain (--torque-gain), the "
              "robot description and that nothing touched the arm; a collision monitor on this model will be "
              "blind or cry wolf", file=sys.stderr)


def _print_consistent(fit) -> None:
    if fit.rejected:
        print(f"WARNING: {fit.rejection()}")
    print(fit.describe_choice())
    what = ("the least-squares ones (the consistent fit is rejected, above)" if fit.rejected
            else "those of a physically consistent link set")
    print(f"coefficients: {what} (least squares alone: residual RMS "
          f"{fit.least_squares.residual_rms:.4f} N m on the recording, {fit.least_squares_cv_rms:.4f} N m held out); "
          f"held-out torque RMS {fit.cv_rms:.4f} N m ({fit.blocks}-block cross-validation: what to expect on "
          "motion like this one); std and RSD: the least-squares ones widened by how far the coefficients move "
          f"when one block is left out (median x{_median_widening(fit):.2f}) (--unconstrained: the plain "
          "least-squares coefficients)")


def _median_widening(fit) -> float:
    import numpy as np

    ls = np.sqrt(np.clip(np.diag(fit.least_squares.covariance), 1e-300, None))
    return float(np.median(fit.model.std / ls))


def _print_friction_choice(model) -> None:
    cands = model.info.get("friction_candidates")
    if cands:
        best = min((c for c in cands if c.get("admissible", True)), key=lambda c: c["bic"])
        print(f"friction: {model.info['friction']} chosen from the data's residual (lowest BIC); fit residual RMS per "
              "candidate: " + ", ".join(f"{c['terms']} {c['residual_rms']:.4f} N m"
                                        + ("" if c.get("admissible", True) else " (negative friction: rejected)")
                                        + (" <-" if c is best else "") for c in cands))
    else:
        print(f"friction: {model.info.get('friction', 'none')} (as requested)")


def _print_model(desc, model) -> None:
    import numpy as np

    print(f"robot {desc.name}: {model.kind} model, {len(model.kept)} of {len(model.all_names)} coefficients, "
          f"{model.n_rows} equations, cond {model.condition_number:.1f}, residual RMS {model.residual_rms:.4f} N m")
    print("| coefficient | value | std | RSD % |\n|---|---:|---:|---:|")
    for name, v, s, r in zip(model.names, model.values, model.std, model.rsd):
        print(f"| {name} | {v:.6g} | {s:.3g} | {r:.2f} |")
    resid = np.asarray(model.per_joint_rms)
    print("per-joint fit residual RMS (N m): " + ", ".join(f"{n} {v:.4f}" for n, v in zip(desc.joint_names, resid)))


def _physical(args, desc, model, data, opts, out, consistent=None):
    """Physically consistent link set fitted to every base coefficient and the friction terms (that of
    the consistent fit when there is one)."""

    from ..files import write_identified_robot
    from ..identification import (
        PRIOR_WEIGHT,
        CoefficientTarget,
        PhysicalRetrieval,
        fit_coefficients,
        full_model_options,
    )

    weight = PRIOR_WEIGHT if args.prior_weight is None else args.prior_weight
    full = model
    if consistent is not None:
        res = consistent.physical
    else:
        if model.info.get("essential"):
            full = fit_coefficients(desc, data, full_model_options(opts, model))
        retrieval = PhysicalRetrieval(desc, CoefficientTarget.from_model(full), prior_weight=weight)
        if retrieval.prior.changed:
            print(f"prior: {retrieval.prior.describe(str(args.robot))}")
        res = retrieval.solve(starts=args.starts, seed=args.seed, progress=False)
    if res.problems:
        raise CommandError("physical retrieval violates constraints: " + "; ".join(res.problems))
    friction = res.joint_friction(desc.n)
    robot_yaml = out.with_name(out.stem + "_robot.yaml")
    written = write_identified_robot(
        args.robot, desc, res.bodies, robot_yaml, friction=friction,
        note=f"Torque RMS on the identification data {res.fit_rms:.4g} N m (coefficients: {res.ls_rms:.4g} N m); "
             f"prior weight {weight:g}.")
    model.info["physical"] = {"fit_rms": res.fit_rms, "coefficients_fit_rms": res.ls_rms, "chi2": res.chi2,
                              "seconds": res.seconds, "prior_weight": weight, "warnings": list(res.warnings),
                              "robot_files": [str(w) for w in written], "friction": friction.to_dict()}
    worse = 100 * (res.fit_rms / res.ls_rms - 1) if res.ls_rms > 0 else float("nan")
    print(f"physical parameters: torque RMS on the identification data {res.fit_rms:.4f} N m, the coefficients "
          f"{res.ls_rms:.4f} N m (+{worse:.1f} %); every link consistent; {res.seconds:.1f} s, {res.starts} starts, "
          f"prior weight {weight:g}")
    if full is not model:
        print("  (fitted to all base coefficients: essential elimination applies to the coefficient file only)")
    print("  masses (kg): " + " / ".join(f"{b.mass:.3f}" for b in res.bodies)
          + "; nominal " + " / ".join(f"{b.mass:.3f}" for b in desc.links))
    if friction.any():
        print("  friction kept in the robot files: viscous " + " ".join(f"{v:.3g}" for v in friction.viscous)
              + " N m s/rad; Coulomb " + " ".join(f"{v:.3g}" for v in friction.coulomb)
              + " N m; offset " + " ".join(f"{v:.3g}" for v in friction.offset) + " N m")
    for w in res.warnings:
        print(f"  warning: {w}")
    print(f"  wrote {', '.join(str(w) for w in written)}")
    if data is not None:
        m_min = _min_mass_eigenvalue(res.description(desc), data.q[:: max(1, data.q.shape[0] // 500)])
        print(f"  M(q) along the identification data: smallest eigenvalue {m_min:.4g} kg m^2")
    return res, friction, written


def _min_mass_eigenvalue(desc, qs) -> float:
    import numpy as np

    from ..model import RigidBodyDynamics

    dyn = RigidBodyDynamics(desc)
    return min(float(np.linalg.eigvalsh(dyn.mass_matrix(q))[0]) for q in qs)


def _print_hold_out(desc, model, physical, held, args) -> None:
    """Torque error of the coefficient file, the physical link set and the nominal description on
    the held-out part (validate's processing)."""
    from ..identification import DescriptionModel, validate_model
    from ..reporting import error_rows

    velocity = model.info.get("velocity", "positions")
    kw = dict(cutoff=args.torque_cutoff, velocity=velocity, rate=args.rate, max_gap=args.max_gap)
    rows = [("coefficients (" + str(args.out) + ")", validate_model(model, desc, held, **kw))]
    if physical is not None:
        res, friction, written = physical
        phys_desc = res.description(desc)
        v = validate_model(DescriptionModel(phys_desc, friction), desc, held, **kw)
        rows.append((f"physical link set ({written[0]})", v))
    nominal = validate_model(DescriptionModel(desc, label="nominal"), desc, held, **kw)
    rows.append(("nominal description (no friction)", nominal))
    print(f"\nhold-out torque RMS (N m) on {nominal.processing}:")
    print(error_rows(rows, desc.joint_names))
    if physical is not None:
        res, _, _ = physical
        m_min = _min_mass_eigenvalue(res.description(desc), held.q[:: max(1, held.n_samples // 500)])
        print(f"physical link set: smallest eigenvalue of M(q) along the hold-out {m_min:.4g} kg m^2 "
              f"({'positive definite' if m_min > 0 else 'NOT positive definite'})")
