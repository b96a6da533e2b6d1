"""Fused attention: softmax(q k^T * scale) v over batches of rows, with an optional causal
mask (key j takes part in query row i's attention where j <= i), keeping the log-sum-exp
of each row's scores for the backward, which recomputes the weights from it; the twin of
``shaders/attention.comp``.

Here the scores of a slice of the batch at a time are formed with BLAS in float32 and
dropped once used (no L x S matrix outlives a call); the softmax between the products is
one compiled pass over each row (float64 exponentials, the causal mask's zeros written, not
computed), where NumPy took eight single-threaded passes. Parts of the batch run on every
core at once, products and softmax together, and self-attention's heads are read from the
projection and written to the output where they lie. The shader streams the keys through
an online softmax instead. Both compute the same function within the tolerance table's
bounds.
"""
from __future__ import annotations

import math

import numpy as np

from . import blas, split
from .jit import fma_kernel, scalar
from .vmath import vexp

SLICE = 1 << 18          # score elements formed at once by a core (1 MiB: they stay in cache)


def _slices(lo: int, hi: int, per: int):
    """Slices of [lo, hi) of SLICE elements or fewer at ``per`` a row (one at least)."""
    step = max(1, SLICE // max(1, per))
    for start in range(lo, hi, step):
        yield slice(start, min(hi, start + step))


def _rows(x):
    """(M, H, L, D) -> (M * H, L, D), contiguous (a copy where x is a view)."""
    return np.ascontiguousarray(x).reshape((-1,) + x.shape[2:])


def _transposed(x):
    """x's last two axes swapped, in memory so, as (M * H, D, L): NumPy's batched product of
    a second operand that is a swapped view took 1.7-1.9 times as long as the copy and the
    product on a contiguous one (batches of 128 x 32 by 32 x 128, 2 cores)."""
    return _rows(np.swapaxes(x, -1, -2))


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


def _forward(q, k, v, o, lse, causal: bool, scale: float) -> None:
    """o and lse of q (N, H, L, D), k and v (N, H, S, D): views of any strides (o (N, H, L,
    D) and lse (N, H, L) too), so a projection's heads are read and written where they lie.
    Parts of N run on every core at once: each part's products are one small BLAS call
    after another (a 128 x 32 by 32 x 128 product is one thread's work), so two parts take
    about half the time of one batched call. A slice's operands are gathered into
    contiguous blocks that stay in cache, its scores formed, weighted and dropped."""
    n, h, rows = q.shape[:3]
    cols = k.shape[2]

    def part(lo, hi):
        for at in _slices(lo, hi, h * rows * cols):
            s = np.matmul(_rows(q[at]), _transposed(k[at]))
            weights_lse = np.empty(s.shape[:2], lse.dtype)
            total = np.empty(s.shape[:2])
            _weights(s, weights_lse, total, scale, causal)
            out = np.matmul(s, _rows(v[at])) / total[..., None]
            o[at] = out.reshape(o[at].shape)
            lse[at] = weights_lse.reshape(lse[at].shape)
    with blas.one_thread():         # (a part's products are one core's: BLAS's threads sleep)
        split.run_ranges(part, split.cuts(n, n * h * rows * cols))


def _backward(q, k, v, o, lse, g, dq, dk, dv, causal: bool, scale: float) -> None:
    """dq, dk, dv (views as q, k, v) of ``_forward`` given g = dL/do (as o)."""
    n, h, rows = q.shape[:3]
    cols = k.shape[2]

    def part(lo, hi):
        for at in _slices(lo, hi, h * rows * cols):
            qs, ks, gs = _rows(q[at]), _rows(k[at]), _rows(g[at])
            # (k transposed from its rows, already gathered and in cache)
            p = np.matmul(qs, np.ascontiguousarray(np.swapaxes(ks, -1, -2)))
            _recomputed(p, lse[at].reshape(p.shape[:2]), scale, causal)
            dv[at] = np.matmul(np.swapaxes(p, -1, -2), gs).reshape(dv[at].shape)
            delta = np.einsum("bld,bld->bl", gs, _rows(o[at]))
            ds = np.matmul(gs, _transposed(v[at]))
            _score_grads(p, ds, delta, scale)
            dq[at] = np.matmul(ds, ks).reshape(dq[at].shape)
            dk[at] = np.matmul(np.swapaxes(ds, -1, -2), qs).reshape(dk[at].shape)
    with blas.one_thread():         # (a part's products are one core's: BLAS's threads sleep)
        split.run_ranges(part, split.cuts(n, n * h * rows * cols))


def attention(q, k, v, causal: bool, scale: float) -> tuple:
    batch, rows, _ = q.shape
    o = np.empty((batch, rows, v.shape[2]), q.dtype)
    lse = np.empty((batch, rows), q.dtype)
    _forward(q[:, None], k[:, None], v[:, None], o[:, None], lse[:, None], bool(causal),
             float(scale))
    return o, lse


def attention_backward(q, k, v, o, lse, g, causal: bool, scale: float) -> tuple:
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    _backward(*(x[:, None] for x in (q, k, v, o, lse, g, dq, dk, dv)), bool(causal),
              float(scale))
    return dq, dk, dv


def _heads(x):
    """(N, L, H, D) -> the view (N, H, L, D)."""
    return x.transpose(0, 2, 1, 3)


def attention_packed(qkv, heads: int, causal: bool, scale: float) -> tuple:
    """``attention`` of q, k, v = qkv[:, :, 0], 1, 2 (N, L, 3, H, D), read in place."""
    n, length = qkv.shape[:2]
    o = np.empty((n, length) + qkv.shape[3:], qkv.dtype)
    lse = np.empty((n * heads, length), qkv.dtype)
    _forward(*(_heads(qkv[:, :, i]) for i in range(3)), _heads(o),
             lse.reshape(n, heads, length), bool(causal), float(scale))
    return o, lse


def attention_packed_backward(qkv, o, lse, g, heads: int, causal: bool, scale: float):
    n, length = qkv.shape[:2]
    grads = np.empty_like(qkv)
    _backward(*(_heads(qkv[:, :, i]) for i in range(3)), _heads(o),
              lse.reshape(n, heads, length), _heads(g),
              *(_heads(grads[:, :, i]) for i in range(3)), bool(causal), float(scale))
    return grads
