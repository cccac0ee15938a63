"""`payload-estimation validate`: per-joint RMS torque error of identified parameters on a recording.

``--params`` is a PARAMS.yaml from `identify`, an identified robot YAML/URDF (physical parameters,
with the joint friction they carry), or ``nominal`` (the --robot description itself). The output
says which samples and which filter the RMS uses; ``--out`` writes exactly what was compared,
``--plot`` draws it (measured vs predicted torque per joint).
"""

from __future__ import annotations

import argparse

from .command_line import output_file
from .identify import add_resampling_arguments
from .recording_input import add_data_arguments
from .robot_option import add_robot_arguments, robot_from_args

HELP = "per-joint RMS torque error of identified parameters (PARAMS.yaml or a robot file) on a recording"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--params", required=True, help="PARAMS.yaml, an identified robot YAML/URDF, or 'nominal'")
    add_data_arguments(parser, multiple=True)
    parser.add_argument("--cutoff", type=float, default=6.0, help="low-pass cut-off in Hz (default 6)")
    add_resampling_arguments(parser)
    parser.add_argument("--out", help="write what was compared as CSV: t, tau_meas1.., tau_pred1.. (N m, filtered); "
                                      "with several recordings, one file each (suffix _1, _2, ...)")
    parser.add_argument("--plot", help="PNG of measured vs predicted torque per joint (suffix _1, _2, ... likewise)")


def _numbered(path: str, k: int, count: int):
    from pathlib import Path

    p = Path(path)
    return p if count == 1 else p.with_name(f"{p.stem}_{k + 1}{p.suffix}")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    for option, path in (("--out", args.out), ("--plot", args.plot)):
        if path:
            output_file(path, option)  # before the comparison (numbered _1, _2 ... go in the same directory)

    from ..files import write_table
    from ..identification import IdentificationError, load_torque_model, validate_model
    from ..reporting import error_table
    from ..signals import split_by_time
    from .recording_input import load_samples

    desc = robot_from_args(args)
    model = load_torque_model(args.params, desc)
    for k, path in enumerate(args.data):
        samples = load_samples(path, desc, args, stamps="required" if args.rate else "captures")
        if args.hold_out is not None:
            _, samples = split_by_time(samples, args.hold_out)
            print(f"validating on the last {args.hold_out:.0%}: t = {samples.t[0]:.3f}..{samples.t[-1]:.3f} s")
        velocity = args.velocity or getattr(model, "info", {}).get("velocity", "auto")
        try:
            v = validate_model(model, desc, samples, cutoff=args.cutoff, velocity=velocity, rate=args.rate,
                               max_gap=args.max_gap)
        except IdentificationError as exc:
            raise IdentificationError(f"{path}: {exc}") from exc
        print(f"compared: {v.processing}")
        print(error_table(v, desc.joint_names, f"{path}: RMS over {v.n_samples} samples, params {args.params}"))
        if args.out:
            out = _numbered(args.out, k, len(args.data))
            n = desc.n
            t = v.t if v.t is not None else np.arange(v.n_samples, dtype=float)
            write_table(out, ["t"] + [f"tau_meas{j + 1}" for j in range(n)] + [f"tau_pred{j + 1}" for j in range(n)],
                        np.column_stack([t, v.measured, v.predicted]), time_column=True)
            print(f"wrote {out} (the {v.n_samples} compared samples)")
        if args.plot:
            from ..reporting import plot_torques

            png = _numbered(args.plot, k, len(args.data))
            t = v.t if v.t is not None else np.arange(v.n_samples, dtype=float)
            plot_torques(png, t, v.measured, v.predicted, desc.joint_names,
                         f"{desc.name}: measured vs predicted torque ({args.params})",
                         predicted_label=f"predicted ({args.params})", measured_label="measured (filtered)")
            print(f"wrote {png}")
        print()
    return 0
