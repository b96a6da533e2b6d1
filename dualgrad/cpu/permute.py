"""Permuting axes: a contiguous copy (data movement only, NumPy's)."""
from __future__ import annotations

import numpy as np


def permute(x: np.ndarray, axes: tuple) -> np.ndarray:
    """x with its axes permuted, as a C-contiguous copy (0-d arrays stay 0-d)."""
    return np.transpose(x, axes).copy(order="C")
