import numpy as np
import pytest
import torch
from scipy import special

from elmoc.outputs.log_bessel import log_iv, log_iv_and_derivative


@pytest.mark.parametrize("m", [300, 512])
def test_finite_over_the_whole_kappa_range_and_matches_exact(m):
    v = m / 2 - 1
    kappa = torch.logspace(-3, 4, 200, dtype=torch.float64).requires_grad_(True)
    value = log_iv(v, kappa)
    value.sum().backward()
    assert torch.isfinite(value).all() and torch.isfinite(kappa.grad).all()
    k = kappa.detach().numpy()
    # exact gradient: the SciPy Bessel ratio I_{v+1}/I_v plus v/kappa
    ive_v, ive_v1 = special.ive(v, k), special.ive(v + 1, k)
    ok = ive_v1 > 1e-280  # scipy in its normal (non-denormal) range
    np.testing.assert_allclose(kappa.grad.numpy()[ok], (ive_v1[ok] / ive_v[ok] + v / k[ok]), rtol=1e-10)
    np.testing.assert_allclose(value.detach().numpy()[ok], np.log(ive_v[ok]) + k[ok], rtol=1e-12)
    # gradient of -log C_m is the Bessel ratio I_{m/2}/I_{m/2-1}
    neg_log_c_grad = -v / k + kappa.grad.numpy()
    np.testing.assert_allclose(neg_log_c_grad[ok], ive_v1[ok] / ive_v[ok], rtol=1e-9)


def test_series_branch_where_scipy_underflows():
    v = 255.0
    k = np.array([1e-3, 0.5, 3.0, 10.0])
    assert (special.ive(v, k[:2]) == 0).all()  # the branch is needed
    value, deriv = log_iv_and_derivative(v, k)
    # first three series terms by hand: (k/2)^v / v! * (1 + q/(v+1) + q^2/(2(v+1)(v+2))), q = k^2/4
    q = k**2 / 4
    lead = v * np.log(k / 2) - special.gammaln(v + 1) + np.log1p(q / (v + 1) + q**2 / (2 * (v + 1) * (v + 2)))
    np.testing.assert_allclose(value[:2], lead[:2], rtol=1e-9)
    # check continuity against scipy where scipy works, using mpmath-free identity log I = log ive + k
    exact = special.ive(v, k[3])
    if exact > 0:
        np.testing.assert_allclose(value[3], np.log(exact) + k[3], rtol=1e-12)
    # derivative by central differences of the series value
    h = 1e-6 * k
    up, _ = log_iv_and_derivative(v, k + h)
    down, _ = log_iv_and_derivative(v, k - h)
    np.testing.assert_allclose(deriv, (up - down) / (2 * h), rtol=1e-5)


def test_series_and_scipy_agree_on_overlap():
    from elmoc.outputs.log_bessel import _series

    v = 149.0
    k = np.array([2.0, 5.0, 20.0])
    value, deriv = _series(v, k)
    np.testing.assert_allclose(value, np.log(special.ive(v, k)) + k, rtol=1e-12)
    np.testing.assert_allclose(deriv, special.ive(v + 1, k) / special.ive(v, k) + v / k, rtol=1e-10)
