"""Layer normalisation over the last axis (rows of a 2-D view), forward and backward.

Row mean and variance (biased, as in PyTorch) are taken in float64; the forward keeps each
row's mean and 1/sqrt(var + eps) for the backward kernel. Big inputs run on every core: the
forward a range of rows a part (the same bits however cut); the backward's gamma and beta
gradients, sums over the rows, are summed in GROUPS fixed ranges of rows and then added in
order, so their bits depend on the shape alone, not on the cores or which thread took
which range.
"""
from __future__ import annotations

import math

import numpy as np

from . import split
from .jit import kernel, scalar

GROUPS = 8              # the backward's ranges of rows for a big input


@scalar
def _row_sums(x, gamma, g, mu, rs):
    """Over a row j: (sum of x), or with g given (sum of dxhat, sum of dxhat * xhat) with
    dxhat = g gamma and xhat = (x - mu) rs; in four running sums each, so the additions
    need not wait on each other (the float64 sum's order is fixed by the row's length)."""
    n = x.shape[0]
    a0 = a1 = a2 = a3 = 0.0
    b0 = b1 = b2 = b3 = 0.0
    top = n - n % 4
    for j in range(0, top, 4):
        if g is None:
            a0 += np.float64(x[j])
            a1 += np.float64(x[j + 1])
            a2 += np.float64(x[j + 2])
            a3 += np.float64(x[j + 3])
        else:
            d0 = np.float64(g[j]) * np.float64(gamma[j])
            d1 = np.float64(g[j + 1]) * np.float64(gamma[j + 1])
            d2 = np.float64(g[j + 2]) * np.float64(gamma[j + 2])
            d3 = np.float64(g[j + 3]) * np.float64(gamma[j + 3])
            a0 += d0
            a1 += d1
            a2 += d2
            a3 += d3
            b0 += d0 * ((np.float64(x[j]) - mu) * rs)
            b1 += d1 * ((np.float64(x[j + 1]) - mu) * rs)
            b2 += d2 * ((np.float64(x[j + 2]) - mu) * rs)
            b3 += d3 * ((np.float64(x[j + 3]) - mu) * rs)
    for j in range(top, n):
        if g is None:
            a0 += np.float64(x[j])
        else:
            d = np.float64(g[j]) * np.float64(gamma[j])
            a0 += d
            b0 += d * ((np.float64(x[j]) - mu) * rs)
    return (a0 + a1) + (a2 + a3), (b0 + b1) + (b2 + b3)


@scalar
def _squares(x, mu):
    """The sum over a row of (x - mu)^2, in four running sums."""
    n = x.shape[0]
    v0 = v1 = v2 = v3 = 0.0
    top = n - n % 4
    for j in range(0, top, 4):
        d0 = np.float64(x[j]) - mu
        d1 = np.float64(x[j + 1]) - mu
        d2 = np.float64(x[j + 2]) - mu
        d3 = np.float64(x[j + 3]) - mu
        v0 += d0 * d0
        v1 += d1 * d1
        v2 += d2 * d2
        v3 += d3 * d3
    for j in range(top, n):
        d = np.float64(x[j]) - mu
        v0 += d * d
    return (v0 + v1) + (v2 + v3)


@kernel
def _forward(x, gamma, beta, eps, y, mean, rstd):
    rows, n = x.shape
    for r in range(rows):
        mu = _row_sums(x[r], gamma, None, 0.0, 0.0)[0] / n
        rs = 1.0 / math.sqrt(_squares(x[r], mu) / n + eps)
        mean[r] = mu
        rstd[r] = rs
        for j in range(n):
            v = (np.float64(x[r, j]) - mu) * rs * np.float64(gamma[j])
            if beta is not None:          # (None: no shift, so -0 stays -0)
                v += np.float64(beta[j])
            y[r, j] = v


@kernel
def _backward(x, gamma, mean, rstd, g, dx, dgamma, dbeta):
    rows, n = x.shape
    for j in range(n):
        dgamma[j] = 0.0
        dbeta[j] = 0.0
    for r in range(rows):
        mu, rs = np.float64(mean[r]), np.float64(rstd[r])
        a, b = _row_sums(x[r], gamma, g[r], mu, rs)    # sums of dxhat, of dxhat * xhat
        a /= n
        b /= n
        for j in range(n):
            xhat = (np.float64(x[r, j]) - mu) * rs
            dgamma[j] += np.float64(g[r, j]) * xhat
            dbeta[j] += np.float64(g[r, j])
            dx[r, j] = rs * (np.float64(g[r, j]) * np.float64(gamma[j]) - a - xhat * b)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None, eps: float):
    """Returns (y, mean, rstd); mean and rstd have one entry per row. ``beta`` None: no
    shift."""
    rows = x.size // x.shape[-1] if x.shape[-1] else 0
    y = np.empty_like(x)
    mean, rstd = np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    if x.size:
        split.run(lambda xs, ys, ms, rs: _forward(xs, gamma, beta, float(eps), ys, ms, rs),
                  (x.reshape(rows, -1), y.reshape(rows, -1), mean, rstd), work=x.size)
    return y, mean, rstd


def layer_norm_backward(x, gamma, mean, rstd, g):
    """Returns (dx, dgamma, dbeta)."""
    n = x.shape[-1]
    rows = x.size // n if n else 0
    dx = np.empty_like(x)
    groups = min(rows, GROUPS) if x.size >= split.SPLIT_MIN else 1
    dgamma64, dbeta64 = np.zeros((groups, n)), np.zeros((groups, n))
    if x.size:
        x2, g2, dx2 = x.reshape(rows, n), g.reshape(rows, n), dx.reshape(rows, n)
        ranges = split.even(rows, groups)

        def group(k, _):
            at = slice(*ranges[k])
            _backward(x2[at], gamma, mean[at], rstd[at], g2[at], dx2[at], dgamma64[k],
                      dbeta64[k])
        split.run_ranges(group, [(k, k + 1) for k in range(groups)])
    dgamma, dbeta = dgamma64[0], dbeta64[0]
    for k in range(1, groups):
        dgamma += dgamma64[k]
        dbeta += dbeta64[k]
    return dx, dgamma.astype(x.dtype), dbeta.astype(x.dtype)
