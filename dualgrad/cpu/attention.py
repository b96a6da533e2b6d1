"""Fused attention: softmax(q k^T * scale) v over batches of rows, with an optional causal
mask (key j takes part in query row i's attention where j <= i), keeping the log-sum-exp
of each row's scores for the backward, which recomputes the weights from it; the twin of
``shaders/attention.comp``.

Here the scores of a slice of the batch at a time are formed with BLAS in float32 and
dropped once used (no L x S matrix outlives a call); the shader streams the keys through
an online softmax instead. Both compute the same function within the tolerance table's
bounds.
"""
from __future__ import annotations

import numpy as np

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


def _scores(q, k, causal: bool, scale: float):
    s = np.matmul(q, _transposed(k))
    s *= s.dtype.type(scale)
    if causal:                     # -inf above the diagonal: added, far faster than masked
        rows, cols = s.shape[-2:]
        s += np.triu(np.full((rows, cols), -np.inf, s.dtype), 1)
    return s


def attention(q, k, v, causal: bool, scale: float) -> tuple:
    batch, rows, _ = q.shape
    o = np.empty((batch, rows, v.shape[2]), q.dtype)
    lse = np.empty((batch, rows), q.dtype)
    for part in _slices(batch, rows, k.shape[1]):
        s = _scores(q[part], k[part], causal, scale)
        m = s.max(-1, keepdims=True)
        p = np.exp(s - m)
        total = p.sum(-1, keepdims=True)
        o[part] = np.matmul(p, v[part]) / total
        lse[part] = (m + np.log(total))[..., 0]
    return o, lse


def attention_backward(q, k, v, o, lse, g, causal: bool, scale: float) -> tuple:
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    batch, rows, _ = q.shape
    for part in _slices(batch, rows, k.shape[1]):
        p = np.exp(_scores(q[part], k[part], causal, scale) - lse[part][..., None])
        gp = g[part]
        dv[part] = np.matmul(np.swapaxes(p, -1, -2), gp)
        delta = np.sum(gp * o[part], -1, keepdims=True)
        ds = p * (np.matmul(gp, _transposed(v[part])) - delta)
        ds *= ds.dtype.type(scale)
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
