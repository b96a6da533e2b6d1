"""Arithmetic of int32 arrays: the twin of ``shaders/intops.comp`` and ``intreduce.comp``.
NumPy's int32 wraps as two's complement does; floor division and remainder are NumPy's
(toward -inf), with 0 for a zero divisor made explicit."""
from __future__ import annotations

import numpy as np

INT32 = np.dtype(np.int32)
_BINARY = {"int_add": np.add, "int_sub": np.subtract, "int_mul": np.multiply,
           "int_floor_divide": np.floor_divide, "int_remainder": np.remainder,
           "int_maximum": np.maximum, "int_minimum": np.minimum}


def integer(op: str, x: np.ndarray, y=None) -> np.ndarray:
    with np.errstate(all="ignore"):
        if op == "int_neg":
            return np.asarray(np.negative(x), INT32, order="C")
        if op == "int_abs":
            return np.asarray(np.abs(x), INT32, order="C")
        result = _BINARY[op](x, y)
        if op in ("int_floor_divide", "int_remainder"):
            result = np.where(np.broadcast_to(y, result.shape) == 0, 0, result)
    return np.asarray(result, INT32, order="C")


_REDUCE = {"int_sum": np.add, "int_max": np.maximum, "int_min": np.minimum}


def int_reduce(op: str, x: np.ndarray, outer: int, n: int, inner: int) -> np.ndarray:
    """op of x read as (outer, n, inner) along n, in int32 (sums wrapping)."""
    return _REDUCE[op].reduce(x.reshape(outer, n, inner), axis=1, dtype=INT32).reshape(-1)
