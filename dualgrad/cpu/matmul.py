"""Matrix products through NumPy's BLAS (sgemm for float32, dgemm for float64).

The reference product is BLAS's: float32 accumulation in the library's blocked order (big
products cut across the cores, ``blas.py``, with the same bits where BLAS allows). Its
agreement with the GPU kernel is bounded by a tolerance that grows with the inner
dimension.
Transposed operands are passed to BLAS as transposed views, never copied.
"""
from __future__ import annotations

import numpy as np

from ..backend import PLAIN, Epilogue
from . import blas, convert16, reduce, unary


def rounded(low, *arrays) -> tuple:
    """The arrays rounded to the 16-bit type ``low`` (nearest even, as the conversions
    round; past its range, inf) and back to their own dtype, one of that type widened to
    float32; as they are where it is None."""
    if low is None:
        return arrays
    with np.errstate(over="ignore"):
        return tuple(convert16.widen(convert16.narrow(x, low)) if x.dtype == np.float32
                     else convert16.widen(x) if x.dtype == low
                     else x.astype(low).astype(x.dtype) for x in arrays)


def matmul(a: np.ndarray, b: np.ndarray, trans_a: bool = False, trans_b: bool = False,
           out: np.ndarray | None = None, epilogue: Epilogue = PLAIN,
           low=None) -> np.ndarray:
    """op(a) @ op(b) for 2-D or batched 3-D operands (a 2-D operand is shared by the batch);
    op transposes the last two axes when its flag is set. ``out``: a C-contiguous array of
    the product's size that BLAS writes into (the same call, so the same bits), returned.
    The epilogue's steps are the other kernels' own: the bias added by numpy's addition
    (one rounding each), relu and the mask by unary's relu and unary_backward's, in place;
    the row sums by the reduction's sum. ``low``: a and b rounded to that 16-bit type
    first (nearest even, as the conversions round), the product of those in float32; an
    operand stored in that type is taken as it is."""
    a, b = rounded(low, a, b)
    if epilogue.row_sums is not None:       # (over the axis a is stored with: k's)
        epilogue.row_sums[...] = reduce.reduce("sum", a, (a.ndim - (2 if trans_a else 1),))
    # A transposed operand shared by a batch, or a batch's transposed second operand, is
    # copied first: NumPy's batched product reads those views more slowly than the copy
    # costs (1.7-1.9 times the copy and the product, for batches of 128 x 32 by 32 x 128);
    # a batch's transposed first operand it reads as fast as a copy.
    if trans_a:
        a = np.swapaxes(a, -1, -2)
        if a.ndim == 2 and b.ndim == 3:
            a = np.ascontiguousarray(a)
    if trans_b:
        b = np.swapaxes(b, -1, -2)
        if b.ndim == 3 or a.ndim == 3:
            b = np.ascontiguousarray(b)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    c = np.empty(shape, np.result_type(a, b)) if out is None else out.reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):   # (inf and NaN propagate, as IEEE's)
        blas.product(a, b, c)
    if epilogue.bias is not None:
        c += epilogue.bias
    if epilogue.relu:
        unary.unary("relu", c, out=c)
    if epilogue.mask is not None:
        mask = epilogue.mask.reshape(c.shape)
        unary.unary_backward("relu", mask, mask, c, out=c)
    return c if out is None else out
