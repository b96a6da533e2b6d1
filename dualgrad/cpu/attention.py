"""Fused attention: softmax(q k^T * scale) v over batches of rows, with an optional causal
mask (key j takes part in query row i's attention where j <= i), keeping the log-sum-exp
of each row's scores for the backward, which recomputes the weights from it; the twin of
``shaders/attention.comp``.

Here the scores of a slice of the batch at a time are formed with BLAS in float32 and
dropped once used (no L x S matrix outlives a call); the softmax between the products is
one compiled pass over each row on every core (float64 exponentials, the causal mask's
zeros written, not computed), where NumPy took eight single-threaded passes. The shader
streams the keys through an online softmax instead. Both compute the same function within
the tolerance table's bounds.
"""
from __future__ import annotations

import math

import numpy as np

from . import split
from .jit import fma_kernel, scalar
from .vmath import vexp

SLICE = 1 << 22          # score elements formed at once


def _slices(batch: int, rows: int, cols: int):
    step = max(1, SLICE // max(1, rows * cols))
    for start in range(0, batch, step):
        yield slice(start, min(batch, start + step))


def _transposed(x):
    """x's last two axes swapped, in memory so: NumPy's batched product of a second operand
    that is a swapped view took 1.7-1.9 times as long as the copy and the product on a
    contiguous one (batches of 128 x 32 by 32 x 128, 2 cores)."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2))


@scalar
def _keys(i, cols, causal):
    """The keys row i sees."""
    return min(i + 1, cols) if causal else cols


@fma_kernel
def _weights(s, lse, total, scale, causal):
    """Each row of the scores s = q k^T (in place) to exp(scale s - m), m the row's largest
    scaled score (0 past the keys the row sees); the sum to total, m + log(sum) to lse."""
    batch, rows, cols = s.shape
    e = np.empty(cols)
    for b in range(batch):
        for i in range(rows):
            keys = _keys(i, cols, causal)
            m = -np.inf
            for j in range(keys):
                m = max(m, s[b, i, j] * scale)
            if m != m or keys == 0:
                m = -np.inf
            for j in range(keys):
                e[j] = vexp(s[b, i, j] * scale - m)
            a0 = a1 = a2 = a3 = 0.0       # (four running sums: the adds need not wait)
            for j in range(0, keys - 3, 4):
                a0 += e[j]
                a1 += e[j + 1]
                a2 += e[j + 2]
                a3 += e[j + 3]
            for j in range(keys - keys % 4, keys):
                a0 += e[j]
            acc = (a0 + a1) + (a2 + a3)
            for j in range(keys):
                s[b, i, j] = e[j]
            for j in range(keys, cols):
                s[b, i, j] = 0.0
            total[b, i] = acc
            lse[b, i] = m + math.log(acc)


@fma_kernel
def _recomputed(s, lse, scale, causal):
    """Each row of s = q k^T (in place) to its weights exp(scale s - lse)."""
    batch, rows, cols = s.shape
    for b in range(batch):
        for i in range(rows):
            keys = _keys(i, cols, causal)
            shift = np.float64(lse[b, i])
            for j in range(keys):
                s[b, i, j] = vexp(s[b, i, j] * scale - shift)
            for j in range(keys, cols):
                s[b, i, j] = 0.0


@fma_kernel
def _score_grads(p, dp, delta, scale):
    """dp (in place) to the scores' gradient p (dp - delta) scale, delta a row's g . o."""
    batch, rows, cols = p.shape
    for b in range(batch):
        for i in range(rows):
            d = np.float64(delta[b, i])
            for j in range(cols):
                dp[b, i, j] = p[b, i, j] * (dp[b, i, j] - d) * scale


def attention(q, k, v, causal: bool, scale: float) -> tuple:
    batch, rows, _ = q.shape
    o = np.empty((batch, rows, v.shape[2]), q.dtype)
    lse = np.empty((batch, rows), q.dtype)
    total = np.empty((batch, rows))
    for part in _slices(batch, rows, k.shape[1]):
        s = np.matmul(q[part], _transposed(k[part]))
        split.run(_weights, (s, lse[part], total[part]), float(scale), bool(causal))
        o[part] = np.matmul(s, v[part]) / total[part][..., None]
    return o, lse


def attention_backward(q, k, v, o, lse, g, causal: bool, scale: float) -> tuple:
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    batch, rows, _ = q.shape
    for part in _slices(batch, rows, k.shape[1]):
        p = np.matmul(q[part], _transposed(k[part]))
        split.run(_recomputed, (p, lse[part]), float(scale), bool(causal))
        gp = g[part]
        dv[part] = np.matmul(np.swapaxes(p, -1, -2), gp)
        delta = np.einsum("bld,bld->bl", gp, o[part])
        ds = np.matmul(gp, _transposed(v[part]))
        split.run(_score_grads, (p, ds, delta), float(scale))
        dq[part] = np.matmul(ds, k[part])
        dk[part] = np.matmul(np.swapaxes(ds, -1, -2), q[part])
    return dq, dk, dv


def _heads(x, i=None):
    """(N, L, [3,] H, D) -> the rows (N * H, L, D) of x (of x[:, :, i]), a copy."""
    x = x if i is None else x[:, :, i]
    n, length, h, d = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(n * h, length, d)


def _unheads(x, n: int):
    """(N * H, L, D) -> (N, L, H, D)."""
    b, length, d = x.shape
    return x.reshape(n, b // n, length, d).transpose(0, 2, 1, 3)


def attention_packed(qkv, heads: int, causal: bool, scale: float) -> tuple:
    """``attention`` of q, k, v = qkv[:, :, 0], 1, 2 (N, L, 3, H, D), as rows (N * H, L, D)."""
    o, lse = attention(*(_heads(qkv, i) for i in range(3)), causal, scale)
    return np.ascontiguousarray(_unheads(o, qkv.shape[0])), lse


def attention_packed_backward(qkv, o, lse, g, heads: int, causal: bool, scale: float):
    n = qkv.shape[0]
    grads = attention_backward(*(_heads(qkv, i) for i in range(3)), _heads(o), lse,
                               _heads(g), causal, scale)
    return np.ascontiguousarray(np.stack([_unheads(d, n) for d in grads], 2))
