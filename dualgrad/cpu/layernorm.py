"""Layer normalisation over the last axis (rows of a 2-D view), forward and backward.

Row mean and variance (biased, as in PyTorch) are taken in float64; the forward keeps each
row's mean and 1/sqrt(var + eps) for the backward kernel.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import kernel


@kernel
def _forward(x, gamma, beta, eps, y, mean, rstd):
    rows, n = x.shape
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += np.float64(x[r, j])
        mu = s / n
        v = 0.0
        for j in range(n):
            d = np.float64(x[r, j]) - mu
            v += d * d
        rs = 1.0 / math.sqrt(v / n + eps)
        mean[r] = mu
        rstd[r] = rs
        for j in range(n):
            y[r, j] = (np.float64(x[r, j]) - mu) * rs * np.float64(gamma[j]) + \
                np.float64(beta[j])


@kernel
def _backward(x, gamma, mean, rstd, g, dx, dgamma, dbeta):
    rows, n = x.shape
    for j in range(n):
        dgamma[j] = 0.0
        dbeta[j] = 0.0
    for r in range(rows):
        mu, rs = np.float64(mean[r]), np.float64(rstd[r])
        a = 0.0       # mean of dxhat
        b = 0.0       # mean of dxhat * xhat
        for j in range(n):
            xhat = (np.float64(x[r, j]) - mu) * rs
            dxhat = np.float64(g[r, j]) * np.float64(gamma[j])
            a += dxhat
            b += dxhat * xhat
            dgamma[j] += np.float64(g[r, j]) * xhat
            dbeta[j] += np.float64(g[r, j])
        a /= n
        b /= n
        for j in range(n):
            xhat = (np.float64(x[r, j]) - mu) * rs
            dx[r, j] = rs * (np.float64(g[r, j]) * np.float64(gamma[j]) - a - xhat * b)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float):
    """Returns (y, mean, rstd); mean and rstd have one entry per row."""
    rows = x.size // x.shape[-1] if x.shape[-1] else 0
    y = np.empty_like(x)
    mean, rstd = np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    if x.size:
        _forward(x.reshape(rows, -1), gamma, beta, float(eps), y.reshape(rows, -1), mean, rstd)
    return y, mean, rstd


def layer_norm_backward(x, gamma, mean, rstd, g):
    """Returns (dx, dgamma, dbeta)."""
    n = x.shape[-1]
    rows = x.size // n if n else 0
    dx = np.empty_like(x)
    dgamma64, dbeta64 = np.zeros(n), np.zeros(n)
    if x.size:
        _backward(x.reshape(rows, n), gamma, mean, rstd, g.reshape(rows, n),
                  dx.reshape(rows, n), dgamma64, dbeta64)
    return dx, dgamma64.astype(x.dtype), dbeta64.astype(x.dtype)
