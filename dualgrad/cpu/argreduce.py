"""argmax and argmin along an axis: the twin of ``shaders/argreduce.comp``. NumPy's rule
is the kernel's: the first maximum (minimum), a NaN counting as past every number."""
from __future__ import annotations

import numpy as np


def argreduce(op: str, x: np.ndarray, outer: int, n: int, inner: int) -> np.ndarray:
    lines = x.reshape(outer, n, inner)
    found = np.argmin(lines, axis=1) if op == "argmin" else np.argmax(lines, axis=1)
    return np.asarray(found.reshape(-1), dtype=np.int32)
