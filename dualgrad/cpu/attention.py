"""Fused attention: softmax(q k^T * scale) v over batches of rows, with an optional causal
mask (key j takes part in query row i's attention where j <= i), keeping the log-sum-exp
of each row's scores for the backward, which recomputes the weights from it; the twin of
``shaders/attention.comp``.

Here the scores of a slice of the batch at a time, or at long contexts of a block of a
head's rows (``_units``: under the causal mask only the keys the block sees, so about half
the square), are formed with BLAS in float32 and dropped once used (no L x S matrix
outlives a call); the softmax between the products is one compiled pass over each row
(float64 exponentials, the causal mask's zeros written, not computed), where NumPy took
eight single-threaded passes. Parts of the batch run on every core at once, products and
softmax together, and self-attention's heads are read from the projection and written to
the output where they lie (compiled gathers and scatters: NumPy's copy of a swapped view
took a quarter of the forward's time). The shader streams the keys through an online
softmax instead. Both compute the same function within the tolerance table's bounds.
float16 and bfloat16 q, k, v (and o, g) are widened to float32 and the outputs of their
type rounded once (lse stays float32), as the shaders' LOW forms do.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import blas, convert16, split
from .jit import fma_kernel, kernel, scalar
from .vmath import vexp

SLICE = 1 << 18          # score elements formed at once by a core (1 MiB: they stay in cache)
BLOCK_ROWS = 16          # a block of query rows is a multiple of this many


def _units(lo: int, hi: int, heads: int, rows: int, cols: int, causal: bool):
    """The units a part of the batch [lo, hi) is computed in, as (items, head, first, last,
    keys): the query rows [first, last) of the batch items ``items`` and their heads
    ``head`` (slices) against their first ``keys`` keys. Whole items, several at once,
    where a head's scores fit in SLICE elements; else each head of an item in blocks of
    rows, so that a block's scores stay in cache, and under the causal mask a block takes
    only the keys its last row sees (half the products' work of the whole square at long
    contexts). The cut depends on a head's rows and keys alone, so heads read in place
    from a projection give the bits of heads copied out of it."""
    everything = slice(None)
    if rows * cols <= SLICE:
        step = max(1, SLICE // max(1, heads * rows * cols))
        for start in range(lo, hi, step):
            yield slice(start, min(hi, start + step)), everything, 0, rows, cols
        return
    block = max(BLOCK_ROWS, SLICE // cols // BLOCK_ROWS * BLOCK_ROWS)
    for item in range(lo, hi):
        for head in range(heads):
            for first in range(0, rows, block):
                last = min(rows, first + block)
                yield (slice(item, item + 1), slice(head, head + 1), first, last,
                       min(last, cols) if causal else cols)


@scalar
def _keys(i, cols, causal):
    """The keys row i sees (i counted from the first row of q)."""
    return min(i + 1, cols) if causal else cols


@scalar
def _row_max(row, keys, scale, lanes):
    """The largest of scale * row[:keys], NaNs passed over (they reach the output through
    their exponentials), in eight running maxima (``lanes``): a select each, which
    vectorises."""
    lanes[:] = -np.inf
    top = keys - keys % 8
    for j in range(0, top, 8):
        for lane in range(8):
            x = row[j + lane] * scale
            lanes[lane] = x if x > lanes[lane] else lanes[lane]
    m = -np.inf
    for lane in range(8):
        m = lanes[lane] if lanes[lane] > m else m
    for j in range(top, keys):
        x = row[j] * scale
        m = x if x > m else m
    return m


@fma_kernel
def _weights(s, lse, total, scale, causal, first):
    """Each row of the scores s = q k^T (in place) to exp(scale s - m), m the row's largest
    scaled score (0 past the keys the row sees); the sum to total, m + log(sum) to lse.
    s's rows are q's from row ``first`` on."""
    batch, rows, cols = s.shape
    e, lanes = np.empty(cols), np.empty(8)
    for b in range(batch):
        for i in range(rows):
            keys = _keys(first + i, cols, causal)
            row = s[b, i]
            m = _row_max(row, keys, scale, lanes)
            for j in range(keys):             # (float64 kept for the sum; one pass)
                x = vexp(row[j] * scale - m)
                e[j] = x
                row[j] = x
            a0 = a1 = a2 = a3 = 0.0       # (four running sums: the adds need not wait)
            for j in range(0, keys - 3, 4):
                a0 += e[j]
                a1 += e[j + 1]
                a2 += e[j + 2]
                a3 += e[j + 3]
            for j in range(keys - keys % 4, keys):
                a0 += e[j]
            acc = (a0 + a1) + (a2 + a3)
            for j in range(keys, cols):
                row[j] = 0.0
            total[b, i] = acc
            lse[b, i] = m + math.log(acc)


@fma_kernel
def _recomputed(s, lse, scale, causal, first):
    """Each row of s = q k^T (in place) to its weights exp(scale s - lse); s's rows are
    q's from row ``first`` on."""
    batch, rows, cols = s.shape
    for b in range(batch):
        for i in range(rows):
            keys = _keys(first + i, cols, causal)
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


@kernel
def _gather(x, rows, transposed):
    """x (M, H, L, D), a view of any strides, into rows (M * H, L, D) or, where
    ``transposed``, (M * H, D, L): one pass, where NumPy's copy of a swapped view took
    a quarter of the forward's time."""
    m, h, length, d = x.shape
    for a in range(m):
        for b in range(h):
            i = a * h + b
            for r in range(length):
                if transposed:
                    for e in range(d):
                        rows[i, e, r] = x[a, b, r, e]
                else:
                    for e in range(d):
                        rows[i, r, e] = x[a, b, r, e]


@kernel
def _scatter_out(out, total, weights_lse, o, lse):
    """out (M * H, L, D) over each row's total into o (M, H, L, D), a view of any strides,
    and weights_lse into lse: the division and the copy in one pass."""
    m, h, length, d = o.shape
    for a in range(m):
        for b in range(h):
            i = a * h + b
            for r in range(length):
                t = total[i, r]
                lse[a, b, r] = weights_lse[i, r]
                for e in range(d):
                    o[a, b, r, e] = np.float64(out[i, r, e]) / t


@kernel
def _scatter(rows, x):
    """rows (M * H, L, D) into x (M, H, L, D), a view of any strides."""
    m, h, length, d = x.shape
    for a in range(m):
        for b in range(h):
            for r in range(length):
                for e in range(d):
                    x[a, b, r, e] = rows[a * h + b, r, e]


@kernel
def _row_dots(g, o, delta):
    """delta (M * H, L) to each row's g . o, in float64 (g and o (M, H, L, D) views)."""
    m, h, length, d = g.shape
    for a in range(m):
        for b in range(h):
            for r in range(length):
                t = 0.0
                for e in range(d):
                    t += np.float64(g[a, b, r, e]) * np.float64(o[a, b, r, e])
                delta[a * h + b, r] = t


def _gathered(x, transposed: bool = False):
    m, h, length, d = x.shape
    out = np.empty((m * h, d, length) if transposed else (m * h, length, d), x.dtype)
    _gather(x, out, transposed)
    return out


def _item_rows(x, at, keys: int, held: list, slot: int):
    """x[at]'s first ``keys`` rows (1, keys, D) for a block of rows, a view of the head's
    rows gathered by its first block into held[slot]. (Whole items gather their
    transposes instead: BLAS multiplies small blocks faster by a contiguous transpose
    than by transposing as it packs; at long contexts they take the same time, and a
    transposed gather of a long row strides through memory.)"""
    if held[slot] is None:
        held[slot] = _gathered(x[at])
    return held[slot][:, :keys]


def _forward(q, k, v, o, lse, causal: bool, scale: float) -> None:
    """o and lse of q (N, H, L, D), k and v (N, H, S, D): views of any strides (o (N, H, L,
    D) and lse (N, H, L) too), so a projection's heads are read and written where they lie.
    Parts of N run on every core at once: each part's products are one small BLAS call
    after another (a 128 x 32 by 32 x 128 product is one thread's work), so two parts take
    about half the time of one batched call. A unit's operands (``_units``) are gathered
    into contiguous blocks that stay in cache, its scores formed, weighted and dropped."""
    n, h, rows = q.shape[:3]
    cols = k.shape[2]

    def part(lo, hi):
        for items, head, first, last, keys in _units(lo, hi, h, rows, cols, causal):
            at = (items, head)
            block = (items, head, slice(first, last))
            if last - first == rows:
                kt, vs = _gathered(k[at], transposed=True), _gathered(v[at])
            else:
                if first == 0:
                    held = [None, None]     # the head's keys and values (its first block)
                kt = np.swapaxes(_item_rows(k, at, keys, held, 0), -1, -2)
                vs = _item_rows(v, at, keys, held, 1)
            s = np.matmul(_gathered(q[block]), kt)
            weights_lse = np.empty(s.shape[:2], lse.dtype)
            total = np.empty(s.shape[:2])
            _weights(s, weights_lse, total, scale, causal, first)
            _scatter_out(np.matmul(s, vs), total, weights_lse, o[block], lse[block])
    with blas.one_thread():         # (a part's products are one core's: BLAS's threads sleep)
        split.run_ranges(part, split.cuts(n, n * h * rows * cols))


def _backward(q, k, v, o, lse, g, dq, dk, dv, causal: bool, scale: float) -> None:
    """dq, dk, dv (views as q, k, v) of ``_forward`` given g = dL/do (as o). Where a head
    is taken in blocks of rows, its key and value gradients are the sums of the blocks'
    products, added in the order of the blocks."""
    n, h, rows = q.shape[:3]
    cols = k.shape[2]

    def part(lo, hi):
        for items, head, first, last, keys in _units(lo, hi, h, rows, cols, causal):
            at = (items, head)
            block = (items, head, slice(first, last))
            if last - first == rows:
                ks = _gathered(k[at])
                kt, vt = _gathered(k[at], transposed=True), _gathered(v[at], transposed=True)
            else:
                if first == 0:
                    held = [None, None]     # the head's keys and values (its first block)
                ks = _item_rows(k, at, keys, held, 0)
                kt = np.swapaxes(ks, -1, -2)
                vt = np.swapaxes(_item_rows(v, at, keys, held, 1), -1, -2)
            qs, gs = _gathered(q[block]), _gathered(g[block])
            p = np.matmul(qs, kt)
            _recomputed(p, lse[block].reshape(p.shape[:2]), scale, causal, first)
            dv_block = np.matmul(np.swapaxes(p, -1, -2), gs)
            delta = np.empty(p.shape[:2], g.dtype)
            _row_dots(g[block], o[block], delta)
            ds = np.matmul(gs, vt)
            _score_grads(p, ds, delta, scale)
            _scatter(np.matmul(ds, ks), dq[block])
            dk_block = np.matmul(np.swapaxes(ds, -1, -2), qs)
            if last - first == rows:                # a whole item (or several)
                _scatter(dk_block, dk[at])
                _scatter(dv_block, dv[at])
                continue
            if first == 0:
                dk_sum = np.zeros((1, cols, dk.shape[3]), dk.dtype)
                dv_sum = np.zeros((1, cols, dv.shape[3]), dv.dtype)
            dk_sum[:, :keys] += dk_block
            dv_sum[:, :keys] += dv_block
            if last == rows:
                _scatter(dk_sum, dk[at])
                _scatter(dv_sum, dv[at])
    with blas.one_thread():         # (a part's products are one core's: BLAS's threads sleep)
        split.run_ranges(part, split.cuts(n, n * h * rows * cols))


def _of_16_bit(rounded: tuple):
    """A kernel made to take float16 and bfloat16 storage: inputs of the first one's type
    widened (exactly), the float32 kernel, the outputs at ``rounded`` (indices; None: the
    one output) rounded to that type."""
    def made(fn):
        @functools.wraps(fn)
        def run(*args):
            low = args[0].dtype
            if low not in convert16.KIND:
                return fn(*args)
            out = fn(*(convert16.widen(a) if isinstance(a, np.ndarray) and a.dtype == low
                       else a for a in args))
            if rounded is None:
                return convert16.narrow(out, low)
            return tuple(convert16.narrow(h, low) if i in rounded else h
                         for i, h in enumerate(out))
        return run
    return made


@_of_16_bit((0,))
def attention(q, k, v, causal: bool, scale: float) -> tuple:
    batch, rows, _ = q.shape
    o = np.empty((batch, rows, v.shape[2]), q.dtype)
    lse = np.empty((batch, rows), q.dtype)
    _forward(q[:, None], k[:, None], v[:, None], o[:, None], lse[:, None], bool(causal),
             float(scale))
    return o, lse


@_of_16_bit((0, 1, 2))
def attention_backward(q, k, v, o, lse, g, causal: bool, scale: float) -> tuple:
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    _backward(*(x[:, None] for x in (q, k, v, o, lse, g, dq, dk, dv)), bool(causal),
              float(scale))
    return dq, dk, dv


def _heads(x):
    """(N, L, H, D) -> the view (N, H, L, D)."""
    return x.transpose(0, 2, 1, 3)


@_of_16_bit((0,))
def attention_packed(qkv, heads: int, causal: bool, scale: float) -> tuple:
    """``attention`` of q, k, v = qkv[:, :, 0], 1, 2 (N, L, 3, H, D), read in place."""
    n, length = qkv.shape[:2]
    o = np.empty((n, length) + qkv.shape[3:], qkv.dtype)
    lse = np.empty((n * heads, length), qkv.dtype)
    _forward(*(_heads(qkv[:, :, i]) for i in range(3)), _heads(o),
             lse.reshape(n, heads, length), bool(causal), float(scale))
    return o, lse


@_of_16_bit(None)
def attention_packed_backward(qkv, o, lse, g, heads: int, causal: bool, scale: float):
    n, length = qkv.shape[:2]
    grads = np.empty_like(qkv)
    _backward(*(_heads(qkv[:, :, i]) for i in range(3)), _heads(o),
              lse.reshape(n, heads, length), _heads(g),
              *(_heads(grads[:, :, i]) for i in range(3)), bool(causal), float(scale))
    return grads
