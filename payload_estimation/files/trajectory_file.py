"""Excitation trajectory files: a Fourier trajectory's samples as CSV and its points as a YAML trajectory file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..identification.excitation import ExcitationError, FourierTrajectory, trajectory_points
from .csv_samples import write_table


def write_trajectory_csv(path: str | Path, traj: FourierTrajectory, rate: float = 100.0, periods: int = 1) -> Path:
    """CSV with columns t, q1..qn, dq1..dqn, ddq1..ddqn (s, rad, rad/s, rad/s^2; model joint order,
    the column scheme of :mod:`payload_estimation.signals.samples`)."""
    t, q, dq, ddq = traj.sample(rate, periods)
    idx = range(1, traj.n + 1)
    header = ["t"] + [f"q{j}" for j in idx] + [f"dq{j}" for j in idx] + [f"ddq{j}" for j in idx]
    return write_table(path, header, np.column_stack([t, q, dq, ddq]), precision=9, time_column=True)


def write_trajectory_file(path: str | Path, traj: FourierTrajectory, rate: float = 50.0, periods: int = 1,
                          cond: float | None = None) -> Path:
    """JointTrajectory-shaped JSON (or YAML by suffix): joint_names, points with positions, velocities,
    accelerations and time_from_start {sec, nanosec}; the Fourier coefficients ride along in
    ``excitation`` so that identification can average whole periods."""
    path = Path(path)
    points = []
    for t, q, dq, ddq in trajectory_points(traj, rate, periods):
        sec = int(math.floor(t))
        points.append({"positions": q.tolist(), "velocities": dq.tolist(), "accelerations": ddq.tolist(),
                       "time_from_start": {"sec": sec, "nanosec": int(round((t - sec) * 1e9))}})
    doc = {"joint_names": list(traj.joint_names), "points": points,
           "excitation": {**traj.to_dict(), "period": traj.period, "periods": periods,
                          "cond": None if cond is None else float(cond)}}
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    else:
        path.write_text(json.dumps(doc))
    return path


def read_trajectory_file(path: str | Path) -> tuple[tuple[str, ...], list[tuple], FourierTrajectory | None]:
    """Inverse of :func:`write_trajectory_file`: joint names, [(t, q, dq, ddq)], Fourier record or None."""
    path = Path(path)
    try:
        text = path.read_text()
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
        names = tuple(doc["joint_names"])
        pts = []
        for i, p in enumerate(doc["points"]):
            tfs = p["time_from_start"]
            t = float(tfs["sec"]) + 1e-9 * float(tfs["nanosec"]) if isinstance(tfs, dict) else float(tfs)
            acc = p.get("accelerations")
            pts.append((t, np.asarray(p["positions"], float),
                        None if not p.get("velocities") else np.asarray(p["velocities"], float),
                        None if not acc else np.asarray(acc, float)))
            if len(pts[-1][1]) != len(names):
                raise ExcitationError(f"{path}: point {i} has {len(pts[-1][1])} positions for {len(names)} joints")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, ExcitationError):
            raise
        raise ExcitationError(f"{path}: not a joint trajectory file ({exc})") from exc
    four = FourierTrajectory.from_dict(doc["excitation"]) if "excitation" in doc else None
    return names, pts, four
