"""Embedding lookup (gather rows) and its backward (scatter-add rows in index order)."""
from __future__ import annotations

import numpy as np

from .jit import kernel


@kernel
def _gather(table, idx, out):
    for i in range(idx.size):
        out[i, :] = table[idx[i], :]


@kernel
def _scatter_add(idx, g, acc):
    # In position order, so that a GPU kernel summing each row's positions in the same
    # order reproduces it.
    for i in range(idx.size):
        row = idx[i]
        for j in range(g.shape[1]):
            acc[row, j] += np.float64(g[i, j])


def embedding(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """out[..., :] = table[idx[...], :]."""
    out = np.empty((idx.size, table.shape[1]), table.dtype)
    _gather(table, idx.reshape(-1), out)
    return out.reshape(idx.shape + (table.shape[1],))


def embedding_backward(idx: np.ndarray, g: np.ndarray, num_rows: int) -> np.ndarray:
    """dL/dtable: each position's gradient row added into the row it looked up."""
    acc = np.zeros((num_rows, g.shape[-1]), np.float64)
    _scatter_add(idx.reshape(-1), g.reshape(idx.size, g.shape[-1]), acc)
    return acc.astype(g.dtype)
