"""Matrix products through NumPy's BLAS (sgemm for float32, dgemm for float64).

The reference product is BLAS's: float32 accumulation in the library's blocked order. Its
agreement with the GPU kernel is bounded by a tolerance that grows with the inner dimension.
Transposed operands are passed to BLAS as transposed views, never copied.
"""
from __future__ import annotations

import numpy as np

from . import elementwise, reduce


def matmul(a: np.ndarray, b: np.ndarray, trans_a: bool = False,
           trans_b: bool = False, bias: np.ndarray | None = None,
           out: np.ndarray | None = None, relu: bool = False,
           mask: np.ndarray | None = None, sums: np.ndarray | None = None) -> np.ndarray:
    """op(a) @ op(b) for 2-D or batched 3-D operands (a 2-D operand is shared by the batch);
    op transposes the last two axes when its flag is set. ``bias`` (one value per output
    column) is added to every row of the product, each addition rounded once. ``out``: a
    C-contiguous array of the product's size that BLAS writes into (the same call, so the
    same bits), returned. ``relu``: then relu each output (unary's relu, in place).
    ``mask`` (the product's shape): then each output kept where mask > 0, else 0 (relu's
    backward from relu's output, as unary_backward makes it). ``sums``: op(a)'s row sums
    written there (the reduction's sum)."""
    if sums is not None:                    # (over the axis a is stored with: k's)
        sums[...] = reduce.reduce("sum", a, (a.ndim - (2 if trans_a else 1),))
    if trans_a:
        a = np.swapaxes(a, -1, -2)
    if trans_b:
        b = np.swapaxes(b, -1, -2)
    if out is None:
        c = np.ascontiguousarray(np.matmul(a, b))
    else:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        c = np.matmul(a, b, out=out.reshape(shape))
    if bias is not None:
        c += bias
    if relu:
        elementwise.unary("relu", c, out=c)
    if mask is not None:
        mask = mask.reshape(c.shape)
        elementwise.unary_backward("relu", mask, mask, c, out=c)
    return c if out is None else out
