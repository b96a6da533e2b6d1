"""Comparisons, logical ops and tests (boolean results, stored as int32 0 or 1), where and
dtype conversion: the twins of ``shaders/logic.comp``, ``where.comp`` and ``convert.comp``.
Each is exact (a selection or an IEEE comparison), so NumPy computes them."""
from __future__ import annotations

import numpy as np

from . import convert16

INT32 = np.dtype(np.int32)
_BINARY = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal, "logical_and": np.logical_and,
           "logical_or": np.logical_or, "logical_xor": np.logical_xor}
_UNARY = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
          "logical_not": np.logical_not}
_INT32_MAX = 2147483647


def logic(op: str, x: np.ndarray, y=None) -> np.ndarray:
    """x op y (or op x) as int32 0 or 1."""
    with np.errstate(invalid="ignore"):
        result = _UNARY[op](x) if y is None else _BINARY[op](x, y)
    return np.asarray(result, dtype=INT32, order="C")


def where(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.where(cond != 0, a, b), dtype=a.dtype)


def cast(x: np.ndarray, dtype) -> np.ndarray:
    """x as ``dtype`` (bools as int32 0 or 1): a float to int32 truncates toward zero,
    saturating past int32's range, NaN becoming 0; to bool, nonzero (NaN too) is 1; a
    float32 to float16 or bfloat16 rounds to nearest even (convert16.py: NumPy's and
    ml_dtypes' roundings), and back exactly."""
    dtype = np.dtype(dtype)
    if dtype in convert16.NARROW and x.dtype == np.float32:
        return convert16.narrow(x, dtype)
    if x.dtype in convert16.NARROW and dtype == np.float32:
        return convert16.widen(x)
    if dtype == np.bool_:
        with np.errstate(invalid="ignore"):
            return np.asarray(x != 0, dtype=INT32)
    if dtype == INT32 and x.dtype.kind == "f":
        wide = np.nan_to_num(x.astype(np.float64), nan=0.0)        # (inf saturates below)
        return np.asarray(np.trunc(np.clip(wide, -_INT32_MAX - 1, _INT32_MAX)), dtype=INT32)
    with np.errstate(over="ignore"):                # (to a 16-bit float: inf past its range)
        return np.array(x, dtype=dtype, order="C")  # (a copy, even of the same dtype)
