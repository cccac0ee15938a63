"""`payload-estimation coefficients`: print a robot's dynamic coefficients and payload terms (paper 000).

Gravity coefficients pi_g (``--gravity``) come from the symbolic potential energy; the full coefficients
from the symbolic Lagrangian for chains of up to 3 joints and otherwise from the numeric base-parameter
mapping of the pinocchio regressor (exact decimals where the numbers are kinematic constants).
``--json`` prints sympy-parsable strings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .robot_option import add_robot_arguments, robot_from_args

HELP = "print the symbolic dynamic coefficients, epsilon(p_L) and the payload Jacobian of a robot"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_robot_arguments(parser)
    parser.add_argument("--gravity", action="store_true",
                        help="gravity coefficients pi_g only (p_L,g = mL, cLx*mL, cLy*mL, cLz*mL)")
    parser.add_argument("--json", action="store_true", help="machine-readable output (sympy-parsable strings)")
    parser.add_argument("--no-cache", action="store_true", help="re-derive instead of using the on-disk cache")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except BrokenPipeError:  # e.g. `| head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    from ..model import derive, group_terms

    desc = robot_from_args(args)
    kind = "gravity" if args.gravity else "full"
    sc = derive(desc, kind, use_cache=not args.no_cache)
    coeffs = sc.coefficients
    eps = sc.epsilon
    jac = sc.payload_jacobian
    if args.json:
        out = {
            "robot": desc.name,
            "kind": kind,
            "method": sc.method,
            "parameters": [str(p) for p in sc.parameters],
            "coefficients": [str(c) for c in coeffs],
            "payload": {
                "frame": desc.payload_frame_name,
                "parameters": [str(p) for p in sc.payload_parameters],
                "epsilon": [str(e) for e in eps],
                "nonzero": sc.nonzero,
                "jacobian": [[str(v) for v in jac.row(i)] for i in range(jac.shape[0])],
            },
        }
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    what = "gravity coefficients pi_g" if args.gravity else "dynamic coefficients pi"
    print(f"{desc.name}: {sc.rank} {what} ({sc.method})")
    if "numeric mapping" in sc.method:
        print("note: full coefficients of this chain come from the numeric base-parameter mapping K (pi = K p); "
              "the symbolic Lagrangian is used up to 3 joints")
    print(f"payload frame: {desc.payload_frame_name}; p_L = ({', '.join(str(p) for p in sc.payload_parameters)})")
    width = len(str(sc.rank))
    for i, (c, e) in enumerate(zip(coeffs, eps)):
        line = f"  pi[{i + 1:>{width}}] = {group_terms(c)}"
        if e != 0:
            line += f"    | eps = {group_terms(e)}"
        print(line)
    print(f"non-zero epsilon components (1-based): {[i + 1 for i in sc.nonzero]}")
    print("J_eps,nz (rows: non-zero components; columns: p_L):")
    for i in sc.nonzero:
        print("  [" + ", ".join(str(v) for v in jac.row(i)) + "]")
    return 0
