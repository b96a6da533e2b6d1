"""The cpu backend: Numba kernels over NumPy arrays, the numerical reference.

Storage handles are C-contiguous NumPy arrays: a tensor's storage is its host value. Data
movement (copy, permute, fill) is NumPy's; arithmetic is Numba's, one module per kernel family
with the same names as the gpu backend's (``dualgrad/gpu/kernels``) and its shaders.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..backend import PLAIN, Backend
from ..shapes import KERNEL_RANK
from . import dropout as _dropout
from . import (argreduce, attention, binary, conv, convert16, embedding, gather, heap,
               intops, layernorm, logic, matmul, optim, reduce, scan, search, softmax, sort,
               strided, unary, unfold)

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32),
           np.dtype(np.bool_), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _into(out, value: np.ndarray) -> np.ndarray:
    """``value``, or ``out`` holding it where an output storage was given."""
    if out is None:
        return value
    out.reshape(-1)[...] = value.reshape(-1)
    return out


class HostBuffer:
    """Host memory for ``stage_out`` / ``stage_in``: on the cpu, an array."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def close(self) -> None:
        self.array = None


class _Landed:
    """The landing of a copy made at once."""

    @staticmethod
    def wait(timeout=None) -> bool:
        return True


LANDED = _Landed()


class CpuBackend(Backend):
    name = "cpu"
    host_storage = True

    def __init__(self):
        heap.keep_freed_memory()          # (a step's arrays reuse the last step's pages)

    # -- storage ----------------------------------------------------------------------------
    def supports(self, dtype) -> bool:
        return np.dtype(dtype) in _DTYPES

    def owns(self, h) -> bool:
        return isinstance(h, np.ndarray)

    def empty(self, shape, dtype, persistent=False):
        return np.empty(shape, dtype)

    def upload(self, array, persistent=False):
        return np.array(array, copy=True, order="C")

    def write(self, h, array) -> None:
        h[...] = array

    def download(self, h) -> np.ndarray:
        return h.copy()

    def indices(self, array):
        return np.asarray(array, dtype=np.int64, order="C")

    def fill(self, h, value) -> None:
        with np.errstate(over="ignore"):            # (past float16's range: inf)
            h.fill(np.float32(value) if h.dtype in convert16.KIND else value)

    def copy(self, dst, src) -> None:
        dst.reshape(-1)[...] = src.reshape(-1)

    def reshape(self, h, shape):
        return h.reshape(shape)

    def host_buffer(self, size, dtype, array=None):
        if array is not None and array.shape == (size,) and array.dtype == dtype:
            return HostBuffer(array)
        return HostBuffer(np.empty(size, dtype))

    def stage_out(self, pieces, buffer, then=None):
        for h, offset in pieces:
            buffer.array[offset:offset + h.size] = h.reshape(-1)
        if then is not None:
            then(LANDED)
        return LANDED

    def stage_in(self, buffer, pieces, before=None) -> None:
        if before is not None:
            before()
        for h, offset in pieces:
            h.reshape(-1)[...] = buffer.array[offset:offset + h.size]

    # -- kernels ----------------------------------------------------------------------------
    def unary(self, op, x, a=0.0, b=0.0, out=None):
        return unary.unary(op, x, a, b, out)

    def unary_backward(self, op, x, y, g, a=0.0, b=0.0, out=None):
        return unary.unary_backward(op, x, y, g, a, b, out)

    def binary(self, op, a, b, out=None):
        return binary.binary(op, a, b, out)

    def binary_backward(self, op, a, b, g):
        return binary.binary_backward(op, a, b, g)

    def reduce(self, op, x, axes, keepdims=False, out=None, center=None, divisor=None):
        if x.ndim > KERNEL_RANK:
            return _into(out, self.wide_reduce(op, x, axes, keepdims, center, divisor))
        return _into(out, reduce.reduce(op, x, axes, keepdims, center, divisor))

    def reduce_backward(self, op, x, y, g, axes):
        if x.ndim > KERNEL_RANK:
            return self.wide_reduce_backward(op, x, y, g, axes)
        return reduce.reduce_backward(op, x, y, g, axes)

    def permute(self, x, axes):
        return strided.permute(x, axes)

    def strided(self, x, shape, strides, offset):
        return strided.strided(x, shape, strides, offset)

    def strided_backward(self, g, size, strides, offset, out=None):
        return strided.strided_backward(g, size, strides, offset, out)

    def matmul(self, a, b, trans_a=False, trans_b=False, out=None, epilogue=PLAIN, low=None,
               result=None):
        product = matmul.matmul(a, b, trans_a, trans_b, out if result is None else None,
                                epilogue, low)
        return product if result is None else convert16.narrow(product, result, out)

    def softmax(self, x):
        return softmax.softmax(x)

    def log_softmax(self, x):
        return softmax.log_softmax(x)

    def softmax_backward(self, y, g):
        return softmax.softmax_backward(y, g)

    def log_softmax_backward(self, y, g):
        return softmax.log_softmax_backward(y, g)

    def softmax_cross_entropy(self, logits, targets, grad=None):
        return softmax.softmax_cross_entropy(logits, targets, grad)

    def softmax_cross_entropy_backward(self, logits, targets, lse, g):
        return softmax.softmax_cross_entropy_backward(logits, targets, lse, g)

    def layer_norm(self, x, gamma, beta, eps):
        return layernorm.layer_norm(x, gamma, beta, eps)

    def layer_norm_backward(self, x, gamma, mean, rstd, g, out=(None, None)):
        dx, dgamma, dbeta = layernorm.layer_norm_backward(x, gamma, mean, rstd, g)
        return dx, _into(out[0], dgamma), _into(out[1], dbeta)

    def embedding(self, table, idx):
        return embedding.embedding(table, idx)

    def embedding_backward(self, idx, g, num_rows, out=None):
        return _into(out, embedding.embedding_backward(idx, g, num_rows))

    def gather(self, x, idx, skip):
        return gather.gather(x, idx, skip)

    def gather_backward(self, idx, g, cols, skip):
        return gather.gather_backward(idx, g, cols, skip)

    def logic(self, op, x, y=None):
        return logic.logic(op, x, y)

    def integer(self, op, x, y=None):
        return intops.integer(op, x, y)

    def int_reduce(self, op, x, outer, n, inner):
        return intops.int_reduce(op, x, outer, n, inner)

    def where(self, cond, a, b):
        return logic.where(cond, a, b)

    def cast(self, x, dtype, out=None):
        return _into(out, logic.cast(x, dtype))

    def argreduce(self, op, x, outer, n, inner):
        return argreduce.argreduce(op, x, outer, n, inner)

    def cumsum(self, x, outer, n, inner, reverse):
        return scan.cumsum(x, outer, n, inner, reverse)

    def cumprod(self, x, outer, n, inner, reverse):
        return scan.cumprod(x, outer, n, inner, reverse)

    def searchsorted(self, rows, values, n, m, shared, right):
        return search.searchsorted(rows, values, n, m, shared, right)

    def sort(self, x, descending):
        return sort.sort(x, descending)

    def unfold(self, x, kernel, dilation, padding, stride, out_size, value):
        return unfold.unfold(x, kernel, dilation, padding, stride, out_size, value)

    def fold(self, cols, size, kernel, dilation, padding, stride, out_size):
        return unfold.fold(cols, size, kernel, dilation, padding, stride, out_size)

    def conv2d(self, x, weight, dilation, padding, stride, out_size, low=None):
        return conv.conv2d(x, weight, dilation, padding, stride, out_size, low)

    def conv2d_weight(self, x, g, kernel, dilation, padding, stride, low=None):
        return conv.conv2d_weight(x, g, kernel, dilation, padding, stride, low)

    def conv2d_input(self, g, weight, size, dilation, padding, stride, low=None):
        return conv.conv2d_input(g, weight, size, dilation, padding, stride, low)

    def max_pool(self, x, kernel, dilation, padding, stride, out_size):
        return unfold.max_pool(x, kernel, dilation, padding, stride, out_size)

    def attention(self, q, k, v, causal, scale):
        return attention.attention(q, k, v, causal, scale)

    def attention_backward(self, q, k, v, o, lse, g, causal, scale):
        return attention.attention_backward(q, k, v, o, lse, g, causal, scale)

    def attention_packed(self, qkv, heads, causal, scale):
        return attention.attention_packed(qkv, heads, causal, scale)

    def attention_packed_backward(self, qkv, o, lse, g, heads, causal, scale):
        return attention.attention_packed_backward(qkv, o, lse, g, heads, causal, scale)

    def dropout(self, x, p, seed, step):
        return _dropout.dropout(x, p, seed, step)

    def optim_step(self, rule, w, g, state, hyper) -> None:
        optim.optim_step(rule, w, g, state, hyper)

    def optim_steps(self, rule, params, hyper) -> None:
        optim.optim_steps(rule, params, hyper)
