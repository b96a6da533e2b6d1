"""Strided copies: permutations, and reads at offset + sum(i[d] * strides[d]) (slices, flips)
with the scatter that is the gradient of an injective one; data movement only (NumPy's).
The twin of ``shaders/strided.comp``."""
from __future__ import annotations

import numpy as np


def permute(x: np.ndarray, axes: tuple) -> np.ndarray:
    """x with its axes permuted, as a C-contiguous copy (0-d arrays stay 0-d)."""
    return np.transpose(x, axes).copy(order="C")


def _view(flat: np.ndarray, shape, strides, offset) -> np.ndarray:
    """The elements of 1-D ``flat`` at offset + sum(i[d] * strides[d]) (element strides)."""
    size = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat[offset:] if offset else flat, tuple(shape),
                                           tuple(int(s) * size for s in strides))


def strided(x: np.ndarray, shape, strides, offset) -> np.ndarray:
    return np.array(_view(x.reshape(-1), shape, strides, offset), order="C")


def strided_backward(g: np.ndarray, size: int, strides, offset, out=None) -> np.ndarray:
    out = np.zeros(size, g.dtype) if out is None else out
    _view(out.reshape(-1), g.shape, strides, offset)[...] = g
    return out
