"""Binary searches of sorted rows: the twin of ``shaders/search.comp``. Each value's index
in its row is found by PyTorch's steps (the midpoint start + (end - start) // 2, moving
right while not ``row[mid] >= v``, or ``>`` for the right side), so a row that is not
sorted, or holds NaNs, gives the same index on both backends; a NaN value gives the row's
length, as every comparison with it is false."""
from __future__ import annotations

import numpy as np

from .jit import kernel

INT32 = np.dtype(np.int32)


@kernel
def _search(rows, values, out, n, m, row_stride, right):
    """out[i] = the insertion index of values[i] in rows[(i // n) * row_stride:][:m]."""
    for i in range(values.size):
        base = (i // n) * row_stride
        v = values[i]
        start, end = 0, m
        while start < end:
            mid = start + (end - start) // 2
            r = rows[base + mid]
            if right:
                past = not (r > v)
            else:
                past = not (r >= v)
            if past:
                start = mid + 1
            else:
                end = mid
        out[i] = start


def searchsorted(rows: np.ndarray, values: np.ndarray, n: int, m: int, shared: bool,
                 right: bool) -> np.ndarray:
    out = np.empty(values.size, INT32)
    if values.size:
        _search(rows.reshape(-1), values.reshape(-1), out, n, m, 0 if shared else m, right)
    return out
