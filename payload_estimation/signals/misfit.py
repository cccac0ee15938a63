"""Does a fit fit? The misfit rule every estimator applies to its residual (issue 46).

A least-squares fit leaves a residual of energy ``rss`` (sum of squares over its rows) after everything its model
may explain was fitted. Its noise model expects ν x σ² of it (ν = rows - fitted parameters, σ² the noise variance
per row): χ²/ν = rss / (ν σ²) is 1 on data the model explains. Above ``MISFIT_CHI2`` (4: the unexplained residual's
RMS twice the expected) the data disagree with the model: something the model lacks (an unmodelled torque, a
signal delayed against the others, a contact that is not one point) is in the rows. Such a misfit is *systematic*:
it does not average down over the rows as noise does, so scaling σ by √(χ²/ν) (the reduced-χ² rescaling, which
treats it as white noise) does not cover what it does to the estimate.

What it can explain: a residual energy U no more of the parameters' shape than it shows moves them by δp with
δpᵀ A δp ≤ U (A the rows' information); that bound is taken as 2σ, i.e. the covariance gets U A⁻¹ / 4, with U the
residual energy beyond ``MISFIT_CHI2`` x its expectation (continuous at the threshold; below it nothing changes).
Done as the rows' information deflated by K = 1 + U / (4 v), v the variance per row the fit already uses (the
noise's, or the scatter it was scaled to): σ grows by √K where the rows determine the parameters, and a prior keeps
the directions they do not. The estimate itself is unchanged; the user is told in words
(:func:`misfit_sentence`) how much residual is unexplained, against what was expected, and what that leaves of the
estimate.

Units: whatever the rows carry (N m for joint torques); ``rss`` in those units squared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MISFIT_CHI2 = 4.0
"""χ²/ν above which the data disagree with the model (module docstring): for fits over thousands of rows, whose
noise model is approximate (a filtered stream's correlation). A fit of a few rows against an exact noise model uses
:func:`significant_chi2` instead."""
FALSE_ALARM = 1e-3
"""Chance that data the noise model explains exceed :func:`significant_chi2`."""


def significant_chi2(dof: int, false_alarm: float = FALSE_ALARM) -> float:
    """χ²/ν that data the noise model explains exceed with probability ``false_alarm``: the threshold of a fit with
    few degrees of freedom (e.g. 1.66 for ν = 66, 4.6 for ν = 5, 6.9 for ν = 2), never below 1."""
    from scipy.stats import chi2

    nu = max(int(dof), 1)
    return max(float(chi2.isf(false_alarm, nu)) / nu, 1.0)


@dataclass(frozen=True)
class Misfit:
    """A fit against its noise model: ``ratio`` its χ²/ν; ``fit_rms`` and ``expected_rms`` the residual's RMS per
    row and what the noise model expects of it; ``widening`` the factor on σ where the rows determine the
    parameters (1: none, the data fit); ``information_scale`` = widening², the factor the rows' variance is
    multiplied by (the rows' information divided by)."""

    ratio: float
    fit_rms: float
    expected_rms: float
    widening: float = 1.0

    @property
    def flagged(self) -> bool:
        """The data disagree with the model (σ widened)."""
        return self.widening > 1.0

    @property
    def information_scale(self) -> float:
        return self.widening ** 2


def check_misfit(rss: float, rows: int, dof: int, noise_var: float, fit_var: float | None = None,
                 threshold: float = MISFIT_CHI2) -> Misfit:
    """The misfit of a residual of energy ``rss`` over ``rows`` rows with ``dof`` degrees of freedom against a noise
    variance ``noise_var`` per row; ``fit_var`` the variance per row the fit's σ already uses (default
    ``noise_var``; a fit whose σ was scaled to its scatter passes that); ``threshold`` the χ²/ν above which σ is
    widened (inf: never; module docstring)."""
    if not (noise_var > 0 and math.isfinite(noise_var)):
        raise ValueError(f"noise variance per row must be finite and > 0, got {noise_var}")
    expected = max(dof, 1) * noise_var
    rss = max(float(rss), 0.0)
    excess = max(rss - threshold * expected, 0.0) if math.isfinite(threshold) else 0.0
    v = noise_var if fit_var is None else max(float(fit_var), noise_var)
    return Misfit(rss / expected, math.sqrt(rss / max(rows, 1)), math.sqrt(expected / max(rows, 1)),
                  math.sqrt(1.0 + excess / (4.0 * v)))


def misfit_sentence(subject: str, misfit: Misfit, consequence: str, advice: str = "", unit: str = "N m",
                    model: str = "the model") -> str:
    """What a user reads when a fit does not fit: ``subject`` (e.g. "the motion has torque") ``model`` does not
    explain, how much against what was expected, σ's widening and its ``consequence`` (what is left of the
    estimate, e.g. "CoM uncertain to ±25 mm, mass to ±0.1 kg (3σ)"), then ``advice`` (what to look for)."""
    m = misfit
    text = (f"{subject} {model} does not explain: {m.fit_rms:.3g} {unit} RMS against {m.expected_rms:.2g} {unit} "
            f"expected (χ²/ν {m.ratio:.3g}); σ widened ×{m.widening:.1f} to what it can explain: {consequence}")
    return f"{text}. {advice}" if advice else text


__all__ = ["FALSE_ALARM", "MISFIT_CHI2", "Misfit", "check_misfit", "misfit_sentence", "significant_chi2"]
