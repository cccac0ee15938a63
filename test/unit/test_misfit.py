"""The shared misfit rule (issue 46, signals.misfit): the threshold, the widening and the words."""

from __future__ import annotations

import math

import numpy as np
import pytest

from payload_estimation.signals.misfit import MISFIT_CHI2, check_misfit, misfit_sentence, significant_chi2


def test_significant_chi2_is_the_chi2_quantile():
    """For ν = 2 the χ² distribution's tail is exp(-x/2): the 1e-3 quantile is -2 ln 1e-3 = 13.82, i.e. 6.91 per ν;
    for large ν it tends to 1 (a Monte-Carlo of fitting residuals exceeds it about once in 1000)."""
    assert significant_chi2(2) == pytest.approx(-2 * math.log(1e-3) / 2, rel=1e-9)
    rng = np.random.default_rng(0)
    nu = 66
    draws = rng.chisquare(nu, 200_000) / nu
    assert np.mean(draws > significant_chi2(nu)) == pytest.approx(1e-3, abs=4e-4)
    assert 1.0 < significant_chi2(10_000) < 1.1


def test_fitting_residual_is_not_widened_and_the_widening_is_continuous():
    """At or below the threshold nothing changes; just above it the widening starts from 1 (no jump); far above it the
    covariance gets the unexplained energy / 4 (2σ) on top of the noise's: K = 1 + U / (4 v)."""
    nu, v = 100, 0.01
    assert not check_misfit(MISFIT_CHI2 * nu * v, nu + 10, nu, v).flagged
    just = check_misfit(MISFIT_CHI2 * nu * v * (1 + 1e-6), nu + 10, nu, v)
    assert just.flagged and just.widening == pytest.approx(1.0, abs=1e-3)
    far = check_misfit(50 * nu * v, nu + 10, nu, v)
    assert far.information_scale == pytest.approx(1 + (50 - MISFIT_CHI2) * nu / 4)
    assert far.ratio == pytest.approx(50) and far.expected_rms == pytest.approx(math.sqrt(nu * v / (nu + 10)))
    assert not check_misfit(50 * nu * v, nu + 10, nu, v, threshold=math.inf).flagged


def test_the_words_say_how_much_against_what_and_what_is_left():
    m = check_misfit(36 * 50 * 0.01, 60, 50, 0.01)
    text = misfit_sentence("the poses have torque", m, "CoM uncertain to ±25 mm", "Look for a cable.")
    assert text.startswith("the poses have torque the model does not explain: ")
    assert f"{m.fit_rms:.3g} N m RMS against {m.expected_rms:.2g} N m expected (χ²/ν 36)" in text
    assert f"σ widened ×{m.widening:.1f} to what it can explain: CoM uncertain to ±25 mm. Look for a cable." in text
