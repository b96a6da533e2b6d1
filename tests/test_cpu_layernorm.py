"""The cpu's layer norm kernels (dualgrad/cpu/layernorm.py) on an input big enough to run
on every core: the definition's values in float64, and the same bits however many cores
run it (the gamma and beta gradients are summed in fixed ranges of rows)."""
import numpy as np
import pytest

from dualgrad.cpu import layernorm, split

RNG = np.random.default_rng(11)
ROWS, N = 2053, 517                     # (past SPLIT_MIN elements; no multiple of 4 or 8)


def inputs():
    x = (RNG.standard_normal((ROWS, N)) * 3 + 1).astype(np.float32)
    g = RNG.standard_normal((ROWS, N)).astype(np.float32)
    gamma = RNG.standard_normal(N).astype(np.float32)
    beta = RNG.standard_normal(N).astype(np.float32)
    return x, g, gamma, beta


def definition(x, g, gamma, beta, eps):
    x, g, gamma, beta = (v.astype(np.float64) for v in (x, g, gamma, beta))
    mu = x.mean(1, keepdims=True)
    rs = 1 / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps)
    xhat = (x - mu) * rs
    dxhat = g * gamma
    dx = rs * (dxhat - dxhat.mean(1, keepdims=True)
               - xhat * (dxhat * xhat).mean(1, keepdims=True))
    return xhat * gamma + beta, dx, (g * xhat).sum(0), g.sum(0)


def run(x, g, gamma, beta, eps):
    y, mean, rstd = layernorm.layer_norm(x, gamma, beta, eps)
    return (y,) + layernorm.layer_norm_backward(x, gamma, mean, rstd, g)


def test_big_inputs_match_the_definition():
    assert ROWS * N >= split.SPLIT_MIN
    x, g, gamma, beta = inputs()
    for got, want in zip(run(x, g, gamma, beta, 1e-5), definition(x, g, gamma, beta, 1e-5)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6 * np.abs(want).max())


@pytest.mark.parametrize("cores", [1, 3])
def test_the_cores_do_not_change_the_bits(monkeypatch, cores):
    x, g, gamma, beta = inputs()
    want = run(x, g, gamma, beta, 1e-5)
    monkeypatch.setattr(split, "cores", lambda: cores)
    for got, expected in zip(run(x, g, gamma, beta, 1e-5), want):
        np.testing.assert_array_equal(got, expected)
