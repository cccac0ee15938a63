"""Plots and text tables shared by the demo, the offline report and the CLI (matplotlib, no ROS).

Figures follow paper 000: Fig. 5 (measured vs predicted joint torques on a validation motion) and
Fig. 6 (residuals with the threshold and the contacts, with and without the payload update).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .identification.least_squares import TorqueError


@dataclass(frozen=True)
class ContactMark:
    """An injected (true) contact: start/end time (s), link name, force magnitude (N)."""

    start: float
    end: float
    link: str
    force: float = float("nan")


@dataclass(frozen=True)
class ValidationTorques:
    """Measured and model torques on a common uniform time grid (s, N m): with and without payload."""

    t: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    unloaded: np.ndarray


def validation_torques(desc, payload, t: np.ndarray, q: np.ndarray, tau: np.ndarray, fs: float = 100.0,
                       cutoff: float = 5.0) -> ValidationTorques:
    """Resample a recording to ``fs`` Hz and predict tau = M q'' + C q' + g with and without ``payload``.

    ``payload``: BodyInertia in the payload frame (or None); q' and q'' from zero-phase low-passed
    positions (``cutoff`` Hz), as in paper 000 Sec. V.
    """
    from .model.dynamics import RigidBodyDynamics
    from .signals.filters import zero_phase_lowpass

    grid = np.arange(t[0], t[-1], 1.0 / fs)
    qg = np.column_stack([np.interp(grid, t, q[:, j]) for j in range(q.shape[1])])
    taug = np.column_stack([np.interp(grid, t, tau[:, j]) for j in range(tau.shape[1])])
    qf = zero_phase_lowpass(qg, cutoff, fs)
    dq = np.gradient(qf, grid, axis=0)
    ddq = np.gradient(dq, grid, axis=0)
    loaded = RigidBodyDynamics(desc, payload)
    unloaded = RigidBodyDynamics(desc)
    pred = np.array([loaded.inverse_dynamics(a, b, c) for a, b, c in zip(qg, dq, ddq)])
    pred0 = np.array([unloaded.inverse_dynamics(a, b, c) for a, b, c in zip(qg, dq, ddq)])
    return ValidationTorques(grid, taug, pred, pred0)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int) -> tuple[int, int]:
    cols = 2 if n > 3 else 1
    return (n + cols - 1) // cols, cols


def plot_torques(path: Path, t: np.ndarray, tau_measured: np.ndarray, tau_predicted: np.ndarray,
                 joint_names: Sequence[str], title: str, predicted_label: str = "model with payload estimate",
                 tau_unloaded: np.ndarray | None = None, mask: np.ndarray | None = None,
                 measured_label: str = "measured τ_J") -> Path:
    """Measured (dashed) vs predicted (solid) joint torques per joint, N m over s (paper Fig. 5).

    ``mask`` (bool per sample) selects the samples the per-joint RMS error in the titles uses
    (e.g. free motion only); the others are shaded grey.
    """
    keep = np.ones(len(t), bool) if mask is None else np.asarray(mask, bool)
    plt = _pyplot()
    n = len(joint_names)
    rows, cols = _grid(n)
    fig, axes = plt.subplots(rows, cols, figsize=(11, 2.2 * rows), sharex=True, squeeze=False)
    for j, ax in enumerate(axes.flat):
        if j >= n:
            ax.set_visible(False)
            continue
        ax.plot(t, tau_measured[:, j], "--", color="tab:green", lw=1.2, label=measured_label)
        ax.plot(t, tau_predicted[:, j], "-", color="tab:blue", lw=1.0, label=predicted_label)
        if tau_unloaded is not None:
            ax.plot(t, tau_unloaded[:, j], ":", color="tab:red", lw=1.0, label="model without payload")
        err = np.sqrt(np.mean((tau_measured[keep, j] - tau_predicted[keep, j]) ** 2))
        if not keep.all():
            ax.fill_between(t, 0, 1, where=~keep, color="0.85", transform=ax.get_xaxis_transform(),
                            label="excluded (contact, stop)")
        ax.set_ylabel(f"{joint_names[j]} [N m]")
        ax.set_title(f"{joint_names[j]}: RMS error {err:.2f} N m", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    axes.flat[0].legend(fontsize=8, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_residuals(path: Path, panels: Sequence[tuple[str, np.ndarray, np.ndarray]], joint_names: Sequence[str],
                   threshold: float | np.ndarray, contacts: Sequence[ContactMark] = (),
                   detections: Sequence[Sequence[float]] = (),
                   phases: Sequence[tuple[float, float, str]] = ()) -> Path:
    """Residual components (N m) over time, one panel per (title, t, r) with threshold and contacts.

    ``detections[k]`` are the detection times of panel k (vertical markers); contacts are shaded;
    ``phases`` (start, end, label) are named along the top of every panel.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 3.4 * len(panels)), sharex=True, squeeze=False)
    thr = np.broadcast_to(np.asarray(threshold, float), (len(joint_names),))
    for k, (ax, (title, t, r)) in enumerate(zip(axes[:, 0], panels)):
        for j, name in enumerate(joint_names):
            ax.plot(t, r[:, j], lw=0.9, label=name)
        ax.axhline(thr.min(), color="k", ls="--", lw=1, label=f"threshold ±{thr.min():g} N m")
        ax.axhline(-thr.min(), color="k", ls="--", lw=1)
        for i, c in enumerate(contacts):
            ax.axvspan(c.start, c.end, color="tab:red", alpha=0.15, label="injected contact" if i == 0 else None)
            ax.annotate(c.link, (c.start, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -10),
                        textcoords="offset points", fontsize=8, color="tab:red")
        for a, b, label in phases:
            ax.axvspan(a, b, color="0.5", alpha=0.06)
            ax.annotate(label, (0.5 * (a + b), 0.0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                        textcoords="offset points", ha="center", fontsize=8, color="0.35")
        if k < len(detections):
            for i, td in enumerate(detections[k]):
                ax.axvline(td, color="tab:purple", lw=1, ls=":", label="detection" if i == 0 else None)
        ax.set_ylabel("residual r [N m]")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


@dataclass(frozen=True)
class SamplingMotion:
    """One sampling call as recorded: its ``title``, stamps ``t`` (s from the call), positions ``q``
    (rad) and measured torques ``tau`` (N m), (N, n) each, the call starting at rest at ``q[0]``."""

    title: str
    t: np.ndarray
    q: np.ndarray
    tau: np.ndarray


def plot_sampling_motion(path: Path, runs: Sequence[SamplingMotion], joint_names: Sequence[str],
                         amplitude_deg: float) -> Path:
    """Per sampling call a row: q - q0 (deg) per joint with the ±``amplitude_deg`` envelope, and the
    measured torque change τ - τ(0) (N m); one shared time axis, so the calls' durations compare at a
    glance (e.g. static poses vs one excitation)."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(runs), 2, figsize=(13, 3.2 * len(runs)), sharex=True, squeeze=False)
    for (ax_q, ax_t), run in zip(axes, runs):
        for j, name in enumerate(joint_names):
            ax_q.plot(run.t, np.degrees(run.q[:, j] - run.q[0, j]), lw=0.9, label=name)
            ax_t.plot(run.t, run.tau[:, j] - run.tau[0, j], lw=0.8, label=name)
        for sign in (1, -1):
            ax_q.axhline(sign * amplitude_deg, color="k", ls="--", lw=1,
                         label=f"envelope ±{amplitude_deg:g}°" if sign > 0 else None)
        ax_q.set_ylabel("q - q0 [deg]")
        ax_t.set_ylabel("τ_J - τ_J(0) [N m]")
        ax_q.set_title(f"{run.title}: {run.t[-1]:.2f} s", fontsize=10)
        ax_t.set_title("measured joint torque change", fontsize=10)
        for ax in (ax_q, ax_t):
            ax.grid(alpha=0.3)
    axes[-1, 0].legend(fontsize=7, ncol=2, loc="upper right")  # the shorter call leaves room
    for ax in axes[-1]:
        ax.set_xlabel("time since the sample call [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


TABLE_WIDTH = 120
"""Characters: the widest line of a results table printed to a terminal (:func:`results_table`)."""

MIN_COLUMN = 8
"""Characters: no column of a wrapped table is made narrower than this (or than its longest word)."""


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str = "", pad: bool = True,
                 width: int | None = None) -> str:
    """The package's one Markdown table writer: floats with 4 significant digits, strings as given.
    ``align``: one letter per column, ``l`` or ``r`` (default left); ``pad``: columns padded to equal
    width (plain text that reads as a table), else compact (generated docs with long cells); ``width``:
    at most this many characters per line (padded tables): the widest columns are narrowed and their
    cells wrapped at spaces onto continuation lines (the other cells of those lines empty)."""
    cells = [[str(h) for h in headers]] + [[_fmt(v) for v in row] for row in rows]
    align = align.ljust(len(headers), "l")
    widths = [max(len(r[i]) for r in cells) if pad else 0 for i in range(len(headers))]
    if pad and width is not None:
        widths = _fit(cells, widths, width)
        cells = [wrapped for r in cells for wrapped in _wrap_row(r, widths)]
    line = lambda r: "| " + " | ".join(c.rjust(w) if a == "r" else c.ljust(w)  # noqa: E731
                                       for c, w, a in zip(r, widths, align)) + " |"
    sep = "|" + "|".join(("-" * (w + 1) if pad else "---") + (":" if a == "r" else "-" if pad else "")
                         for w, a in zip(widths, align)) + "|"
    head = 1 if not (pad and width is not None) else len(_wrap_row([str(h) for h in headers], widths))
    return "\n".join([line(r) for r in cells[:head]] + [sep] + [line(r) for r in cells[head:]])


def _fit(cells: list[list[str]], widths: list[int], width: int) -> list[int]:
    """Column widths whose table lines (``| a | b |``: 3 characters per column and 1) fit ``width``: characters taken
    off the column where they cost the fewest wrapped lines per character (looking as far as the excess, so that
    a column whose first character costs several lines but frees many is not passed over), none below
    :data:`MIN_COLUMN` or its longest word."""
    floor = [max(MIN_COLUMN, *(len(w) for r in cells for w in r[i].split() or [""])) for i in range(len(widths))]
    widths = list(widths)

    def lines(i: int, w: int) -> int:
        return sum(len(_wrap_row([r[i]], [w])) for r in cells)

    while (excess := sum(widths) + 3 * len(widths) + 1 - width) > 0:
        options = [((lines(i, widths[i] - d) - lines(i, widths[i])) / d, -d, i)
                   for i in range(len(widths)) for d in range(1, min(excess, widths[i] - floor[i]) + 1)]
        if not options:
            break  # nothing left to narrow: words longer than the budget
        _, minus_d, i = min(options)
        widths[i] += minus_d
    return widths


def _wrap_row(row: list[str], widths: list[int]) -> list[list[str]]:
    """``row`` as table lines: each cell wrapped at spaces to its column's width."""
    import textwrap

    parts = [textwrap.wrap(c, w, break_long_words=True, break_on_hyphens=False) or [""] for c, w in zip(row, widths)]
    return [[p[k] if k < len(p) else "" for p in parts] for k in range(max(len(p) for p in parts))]


def results_table(rows: Sequence[Sequence[object]]) -> str:
    """The demos' results table (quantity, true, measured / estimated, note), at most :data:`TABLE_WIDTH` wide."""
    return format_table(("quantity", "true", "measured / estimated", "note"), rows, width=TABLE_WIDTH)


def error_table(err: TorqueError, joint_names: Sequence[str], title: str = "") -> str:
    """Markdown table of a torque prediction's per-joint RMS and max error (N m) and relative RMS."""
    rows = [(name, f"{err.per_joint_rms[j]:.4f}", f"{err.max_abs[j]:.4f}", f"{err.per_joint_relative[j]:.3f}")
            for j, name in enumerate(joint_names)]
    rows.append(("all", f"{err.total_rms:.4f}", f"{err.max_abs.max():.4f}", ""))
    table = format_table(("joint", "RMS error (N m)", "max error (N m)", "relative"), rows, "lrrr")
    return f"**{title}**\n\n{table}" if title else table


def error_rows(rows: Sequence[tuple[str, TorqueError]], joint_names: Sequence[str]) -> str:
    """Markdown table, one row per (label, error): total then per-joint RMS (N m)."""
    body = [(label, f"{e.total_rms:.3f}", *(f"{v:.3f}" for v in e.per_joint_rms)) for label, e in rows]
    return format_table(("model", "total", *joint_names), body, "l" + "r" * (len(joint_names) + 1))


def _fmt(v: object) -> str:
    if isinstance(v, float | np.floating):
        if not np.isfinite(v):
            return "n/a"
        return f"{v:.4g}"
    return str(v)
