"""Comparisons, logical ops and tests (boolean results, NumPy's bools: a byte each), where
and dtype conversion: the twins of ``shaders/logic.comp``, ``where.comp`` and
``convert.comp``. Each is exact (a selection or an IEEE comparison), so NumPy computes them;
the common big ones (a comparison of arrays of one shape, or of an array with one value, and
a bool's conversion to float32) run in compiled loops on every core."""
from __future__ import annotations

import numpy as np

from . import convert16, split
from .jit import kernel, scalar

INT32, BOOL = np.dtype(np.int32), np.dtype(np.bool_)
_BINARY = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal, "logical_and": np.logical_and,
           "logical_or": np.logical_or, "logical_xor": np.logical_xor}
_UNARY = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
          "logical_not": np.logical_not}
_INT32_MAX = 2147483647


@scalar
def _compared(code, a, b):
    """a op b (op by its index in eq, ne, lt, le, gt, ge)."""
    if code == 0:
        r = a == b
    elif code == 1:
        r = a != b
    elif code == 2:
        r = a < b
    elif code == 3:
        r = a <= b
    elif code == 4:
        r = a > b
    else:
        r = a >= b
    return r


def _comparison(code: int):
    def compare(x, y, out):
        """out = x op y, y of x's length or of one element: a loop for each, so
        that both vectorise (y[i * step] kept the loop scalar)."""
        if y.size == x.size:
            for i in range(x.size):
                out[i] = _compared(code, x[i], y[i])
        else:
            b = y[0]
            for i in range(x.size):
                out[i] = _compared(code, x[i], b)
    return kernel(compare)


_COMPILED = (np.dtype(np.float32), np.dtype(np.float64), INT32)   # (not the 16-bit types)
_COMPARE = {op: _comparison(code) for code, op in enumerate(("eq", "ne", "lt", "le", "gt",
                                                             "ge"))}


@kernel
def _widen_flags(x, out):
    for i in range(x.size):
        out[i] = np.float32(x[i])


def _flat(kernel_, out: np.ndarray, x: np.ndarray, y: np.ndarray | None = None) -> None:
    """kernel_ over flat x (and y: x's length or one element) into out, on every core
    where they are big."""
    if y is None or y.size == x.size:
        split.run(kernel_, tuple(a for a in (x, y) if a is not None) + (out,))
    else:
        split.run(lambda xs, o: kernel_(xs, y, o), (x, out))


def logic(op: str, x: np.ndarray, y=None) -> np.ndarray:
    """x op y (or op x) as bools."""
    if op in _COMPARE and x.dtype == y.dtype and x.dtype in _COMPILED and \
            (y.shape == x.shape or y.size == 1) and x.ndim >= y.ndim and \
            x.flags.c_contiguous and y.flags.c_contiguous:
        out = np.empty(x.shape, BOOL)
        if out.size:
            _flat(_COMPARE[op], out.reshape(-1), x.reshape(-1), y.reshape(-1))
        return out
    with np.errstate(invalid="ignore"):
        result = _UNARY[op](x) if y is None else _BINARY[op](x, y)
    return np.asarray(result, dtype=BOOL, order="C")


def where(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.where(cond, a, b), dtype=a.dtype)


def cast(x: np.ndarray, dtype) -> np.ndarray:
    """x as ``dtype``: a float to int32 truncates toward zero,
    saturating past int32's range, NaN becoming 0; to bool, nonzero (NaN too) is 1; a
    float32 to float16 or bfloat16 rounds to nearest even (convert16.py: NumPy's and
    ml_dtypes' roundings), and back exactly."""
    dtype = np.dtype(dtype)
    if dtype in convert16.NARROW and x.dtype == np.float32:
        return convert16.narrow(x, dtype)
    if x.dtype in convert16.NARROW and dtype == np.float32:
        return convert16.widen(x)
    if x.dtype in (INT32, BOOL) and dtype == np.float32 and x.flags.c_contiguous:
        out = np.empty(x.shape, np.float32)
        if out.size:
            _flat(_widen_flags, out.reshape(-1), x.reshape(-1))
        return out
    if dtype == np.bool_:
        with np.errstate(invalid="ignore"):
            return np.asarray(x != 0, order="C")
    if dtype == INT32 and x.dtype.kind == "f":
        wide = np.nan_to_num(x.astype(np.float64), nan=0.0)        # (inf saturates below)
        return np.asarray(np.trunc(np.clip(wide, -_INT32_MAX - 1, _INT32_MAX)), dtype=INT32)
    with np.errstate(over="ignore"):                # (to a 16-bit float: inf past its range)
        return np.array(x, dtype=dtype, order="C")  # (a copy, even of the same dtype)
