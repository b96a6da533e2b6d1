"""Softmax, log-softmax and the fused softmax cross-entropy, over the last axis of a 2-D view.

Row statistics (max, sum of exponentials) are taken in float64; each output is rounded once.
Each exponential is computed once, kept in a float64 scratch row between the sum and the
outputs.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import fma_kernel, scalar
from .vmath import vexp


@scalar
def _row_max_sumexp(x, r, e):
    """(max, sum of exp(x - max)) of row r; e (float64, a row long) gets the exponentials."""
    m = -math.inf
    for j in range(x.shape[1]):
        m = max(m, np.float64(x[r, j]))
    for j in range(x.shape[1]):
        e[j] = vexp(np.float64(x[r, j]) - m)
    s = 0.0
    for j in range(x.shape[1]):      # apart from the exponentials, which then vectorise
        s += e[j]
    return m, s


@fma_kernel                    # vmath's exp polynomial
def _softmax_rows(x, out, log):
    rows, n = x.shape
    e = np.empty(n)
    for r in range(rows):
        m, s = _row_max_sumexp(x, r, e)
        if log:         # (x - m) - log s: m + log s would round away log s for a big m
            log_s = math.log(s)
            for j in range(n):
                out[r, j] = (np.float64(x[r, j]) - m) - log_s
        else:
            for j in range(n):
                out[r, j] = e[j] / s


@fma_kernel
def _softmax_grad_rows(y, g, out, log):
    rows, n = y.shape
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += np.float64(g[r, j]) if log else np.float64(g[r, j]) * np.float64(y[r, j])
        for j in range(n):
            if log:       # d log_softmax: g - softmax * sum(g)
                out[r, j] = np.float64(g[r, j]) - vexp(np.float64(y[r, j])) * s
            else:         # d softmax: y * (g - sum(g * y))
                out[r, j] = np.float64(y[r, j]) * (np.float64(g[r, j]) - s)


@fma_kernel
def _xent_forward(x, targets, stats):
    rows, n = x.shape
    total = 0.0
    e = np.empty(n)
    for r in range(rows):
        m, s = _row_max_sumexp(x, r, e)
        log_s = math.log(s)
        stats[r, 0], stats[r, 1] = m, log_s
        total += (m - np.float64(x[r, targets[r]])) + log_s
    return total


@fma_kernel
def _xent_backward(x, targets, stats, g, out):
    rows, n = x.shape
    scale = g / rows
    for r in range(rows):
        m, log_s = np.float64(stats[r, 0]), np.float64(stats[r, 1])
        for j in range(n):
            p = vexp((np.float64(x[r, j]) - m) - log_s)
            out[r, j] = (p - (1.0 if j == targets[r] else 0.0)) * scale


def _rows(x):
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def softmax(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    if x.size:
        _softmax_rows(_rows(x), _rows(out), False)
    return out


def log_softmax(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    if x.size:
        _softmax_rows(_rows(x), _rows(out), True)
    return out


def softmax_backward(y: np.ndarray, g: np.ndarray) -> np.ndarray:
    out = np.empty_like(g)
    if g.size:
        _softmax_grad_rows(_rows(y), _rows(g), _rows(out), False)
    return out


def log_softmax_backward(y: np.ndarray, g: np.ndarray) -> np.ndarray:
    out = np.empty_like(g)
    if g.size:
        _softmax_grad_rows(_rows(y), _rows(g), _rows(out), True)
    return out


def softmax_cross_entropy(logits: np.ndarray, targets: np.ndarray, grad=None):
    """Mean over rows of -log softmax(logits)[target], each row's (max - target logit) + log
    sum exp(logit - max); returns (loss of shape (), the rows' statistics (rows, 2): max and
    log sum, kept for the backward kernel: their sum, rounded, would lose log sum beside a
    big max). ``grad`` (logits' shape), where given, receives dL/dlogits for dL/dloss = 1,
    as the backward makes it."""
    stats = np.empty((logits.shape[0], 2), logits.dtype)
    total = _xent_forward(logits, targets, stats) if logits.size else 0.0
    with np.errstate(invalid="ignore"):
        loss = np.array(total / logits.shape[0], dtype=logits.dtype)
    if grad is not None and logits.size:
        _xent_backward(logits, targets, stats, 1.0, grad)
    return loss, stats


def softmax_cross_entropy_backward(logits, targets, stats, g) -> np.ndarray:
    """dL/dlogits = (softmax(logits) - onehot(targets)) * g / rows, g = dL/dloss (shape ()),
    softmax as exp((logit - max) - log sum) from the forward's statistics."""
    out = np.empty_like(logits)
    if logits.size:
        _xent_backward(logits, targets, stats, float(g), out)
    return out
