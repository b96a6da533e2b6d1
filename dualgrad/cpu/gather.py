"""Gather along rows (out[r, k] = x[r, idx[r, k]]) and its backward, a scatter-add in k
order: the twin of ``shaders/gather.comp``. An index equal to ``skip`` (an ignored target)
gathers 0 and receives nothing; an x of one row is shared by every row of idx."""
from __future__ import annotations

import numpy as np

from .jit import kernel


@kernel
def _gather(x, idx, skip, out):
    shared = x.shape[0] == 1
    for r in range(idx.shape[0]):
        row = 0 if shared else r
        for k in range(idx.shape[1]):
            j = idx[r, k]
            out[r, k] = 0.0 if j == skip else x[row, j]


@kernel
def _scatter_add(idx, g, skip, out):
    # In the output's dtype and in k order: the shader adds in the same order, so the
    # results agree bit for bit.
    for r in range(idx.shape[0]):
        for k in range(idx.shape[1]):
            j = idx[r, k]
            if j != skip:
                out[r, j] += g[r, k]


def gather(x: np.ndarray, idx: np.ndarray, skip: int) -> np.ndarray:
    out = np.empty(idx.shape, x.dtype)
    _gather(x, idx, skip, out)
    return out


def gather_backward(idx: np.ndarray, g: np.ndarray, cols: int, skip: int) -> np.ndarray:
    out = np.zeros((idx.shape[0], cols), g.dtype)
    _scatter_add(idx, g, skip, out)
    return out
