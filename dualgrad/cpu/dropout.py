"""Dropout with a counter-based mask: Philox4x32-10 keyed by (seed, step, element index).

The mask of element i at a given (seed, step) is a pure function of those three numbers, so
the GPU kernel reproduces it exactly, the backward pass regenerates it instead of storing it,
and a checkpoint only needs the seed and the step counter.

Counter = (i // 4 low, i // 4 high, step low, step high), key = (seed low, seed high); element
i takes output word i % 4, keeps its top 24 bits u and is kept when u >= round(p * 2**24).
"""
from __future__ import annotations

import numpy as np

from ..backend import dropout_scale, dropout_threshold
from .jit import kernel, scalar

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)


@scalar
def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on a 128-bit counter and 64-bit key (all words as uint64 < 2**32)."""
    for _ in range(10):
        p0 = _M0 * c0
        p1 = _M1 * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + _W0) & _MASK32
        k1 = (k1 + _W1) & _MASK32
    return c0, c1, c2, c3


@kernel
def _dropout(x, out, threshold, scale, seed, step):
    k0, k1 = np.uint64(seed) & _MASK32, np.uint64(seed) >> np.uint64(32)
    s0, s1 = np.uint64(step) & _MASK32, np.uint64(step) >> np.uint64(32)
    n = x.size
    for block in range((n + 3) // 4):
        b = np.uint64(block)
        r = philox4x32(b & _MASK32, b >> np.uint64(32), s0, s1, k0, k1)
        for w in range(4):
            i = block * 4 + w
            if i < n:
                keep = (r[w] >> np.uint64(8)) >= threshold
                out[i] = np.float64(x[i]) * scale if keep else 0.0


def dropout(x: np.ndarray, p: float, seed: int, step: int) -> np.ndarray:
    """x * mask / (1 - p) with the mask of (seed, step); also the backward (same mask)."""
    out = np.empty_like(x)
    _dropout(x.reshape(-1), out.reshape(-1), np.uint64(dropout_threshold(p)),
             dropout_scale(p, x.dtype),
             np.uint64(seed), np.uint64(step))
    return out
