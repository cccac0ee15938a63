"""`payload-estimation validate`: per-joint RMS torque error of identified parameters on a recording.

``--params`` is a PARAMS.yaml from `identify`, an identified robot YAML/URDF (physical parameters),
or ``nominal`` (the --robot description itself, for comparison).
"""

from __future__ import annotations

import argparse

HELP = "per-joint RMS torque error of identified parameters (PARAMS.yaml or a robot file) on a recording"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", required=True, help="lwr4, iiwa14, or a robot YAML / URDF path")
    parser.add_argument("--params", required=True, help="PARAMS.yaml, an identified robot YAML/URDF, or 'nominal'")
    parser.add_argument("--data", required=True, nargs="+", help="recording(s): CSV file or rosbag2 directory")
    parser.add_argument("--topic", default="joint_states", help="JointState topic in a rosbag (default joint_states)")
    parser.add_argument("--cutoff", type=float, default=6.0, help="low-pass cut-off in Hz (default 6)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from ..identification.robot_identification import IdentifiedModel, error_table, validate_model
    from ..model.robot_file import load_robot
    from .identify import load_samples

    desc = load_robot(args.robot)
    if args.params == "nominal":
        model = _DescriptionModel(desc)
    else:
        p = Path(args.params)
        if not p.exists():
            raise ValueError(f"{p}: no such parameter file")
        doc = yaml.safe_load(p.read_text()) if p.suffix.lower() in (".yaml", ".yml") else None
        if isinstance(doc, dict) and "format" in doc:
            model = IdentifiedModel.from_dict(doc, str(p))
        else:
            model = _DescriptionModel(load_robot(p))
    for path in args.data:
        samples = load_samples(path, desc, args.topic)
        err = validate_model(model, desc, samples, cutoff=args.cutoff)
        print(error_table(err, desc.joint_names, f"{path}: {samples.n_samples} samples, params {args.params}"))
        print()
    return 0


class _DescriptionModel:
    """Torque prediction by inverse dynamics of a (physically consistent) description."""

    kind = "full"

    def __init__(self, desc):
        self.desc = desc

    def check_robot(self, desc):
        if desc.n != self.desc.n:
            raise ValueError(f"parameter robot has {self.desc.n} joints, '{desc.name}' has {desc.n}")

    def predict(self, dyn, q, dq=None, ddq=None):
        import numpy as np

        from ..model.dynamics import RigidBodyDynamics

        d = RigidBodyDynamics(self.desc)
        return np.array([d.inverse_dynamics(q[k], dq[k], ddq[k]) for k in range(len(q))])
