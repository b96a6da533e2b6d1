"""The gpu backend: the primitives of the backend contract on a Vulkan ``Device``.

Storage handles are DeviceArrays in one of the device's pools: ``pass`` (arenas the front
end frees a slot of at each tape or evaluation) and ``persistent`` (parameters, their
gradients, optimizer state, values that came from the host). Each kernel family's launch
code is its module in ``kernels/``, named like its cpu twin.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..backend import PLAIN, Backend
from ..shapes import KERNEL_RANK
from .capture import Recording
from .context import Context
from .device import F32, Device
from .kernels import (argreduce, attention, conv, dropout, elementwise, embedding, gather,
                      layernorm, logic, matmul, optim, reduce, scan, search, softmax, sort,
                      strided, unfold)


BOOL, INT32 = np.dtype(np.bool_), np.dtype(np.int32)
_DTYPES = (F32, INT32, BOOL,                                   # (bools a byte each)
           np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))  # (two to a 32-bit word)


class GpuBackend(Backend):
    name = "gpu"

    @classmethod
    def open(cls, index: int | None = None) -> "GpuBackend":
        """Open a Vulkan device (raises DeviceUnavailable when there is none)."""
        return cls(Context.get(index))

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.device = device = Device(ctx)
        self.device_index = device.index
        # The calls every op or tape makes, bound to the device's own: one call fewer each.
        self.owns, self.empty, self.reshape = device.owns, device.empty, device.reshape
        self.begin_pass, self.use_pass = device.begin_pass, device.use_pass

    # -- storage ----------------------------------------------------------------------------
    def supports(self, dtype) -> bool:
        return np.dtype(dtype) in _DTYPES

    def owns(self, h) -> bool:
        return self.device.owns(h)

    def empty(self, shape, dtype=F32, persistent=False):
        return self.device.empty(shape, dtype, persistent)

    def upload(self, array, persistent=False):
        return self.device.upload(array, persistent)

    def write(self, h, array) -> None:
        self.device.write(h, array)

    def download(self, h) -> np.ndarray:
        return self.device.download(h)

    def host_buffer(self, size, dtype, array=None):
        return self.device.host_buffer(size, dtype, array)

    def stage_out(self, pieces, buffer, then=None):
        return self.device.stage_out(pieces, buffer, then)

    def stage_in(self, buffer, pieces, before=None) -> None:
        self.device.stage_in(buffer, pieces, before)

    def indices(self, array):
        return self.device.indices(array)

    def fill(self, h, value) -> None:
        self.device.fill(h, value)

    def copy(self, dst, src) -> None:
        self.device.copy(dst, src)

    def reshape(self, h, shape):
        return self.device.reshape(h, shape)

    # -- pools, counters, capture --------------------------------------------------------------
    def begin_pass(self, slot) -> None:
        self.device.begin_pass(slot)

    def use_pass(self, slot) -> None:
        self.device.use_pass(slot)

    def release(self) -> None:
        self.device.release()

    def memory(self) -> dict:
        return self.device.memory()

    def reset_peak_memory(self) -> None:
        self.device.reset_peak_memory()

    def synchronize(self) -> None:
        self.device.synchronize()

    def transfers(self) -> dict:
        return self.device.rec.counters.transfers()

    def reset_transfers(self) -> None:
        self.device.rec.counters.reset()

    def record(self, args):
        return Recording(self.device, args)

    def replay_dropout(self, recorded, seed, step) -> None:
        dropout.replay_dropout(self.device, recorded, seed, step)

    # -- kernels ----------------------------------------------------------------------------
    def unary(self, op, x, a=0.0, b=0.0, out=None):
        return elementwise.unary(self.device, op, x, a, b, out)

    def unary_backward(self, op, x, y, g, a=0.0, b=0.0, out=None):
        return elementwise.unary_backward(self.device, op, x, y, g, a, b, out)

    def binary(self, op, a, b, out=None):
        return elementwise.binary(self.device, op, a, b, out)

    def binary_backward(self, op, a, b, g):
        return elementwise.binary_backward(self.device, op, a, b, g)

    def reduce(self, op, x, axes, keepdims=False, out=None, center=None, divisor=None):
        if len(x.shape) > KERNEL_RANK:
            y = self.wide_reduce(op, x, axes, keepdims, center, divisor)
            if out is not None:
                self.copy(self.reshape(out, tuple(y.shape)), y)
                return out
            return y
        return reduce.reduce(self.device, op, x, axes, keepdims, out, center, divisor)

    def reduce_backward(self, op, x, y, g, axes):
        if len(x.shape) > KERNEL_RANK:
            return self.wide_reduce_backward(op, x, y, g, axes)
        return reduce.reduce_backward(self.device, op, x, y, g, axes)

    # The kernels that move elements move 32-bit words: bools (a byte each) go through int32
    # (masks are small beside what they select; comparisons, where's condition and casts
    # read and write the bytes themselves).
    def _moved(self, kernel, x, *args):
        """kernel(device, x, *args), a bool x moved as int32."""
        dev = self.device
        if x.dtype != BOOL:
            return kernel(dev, x, *args)
        return logic.cast(dev, kernel(dev, logic.cast(dev, x, INT32), *args), BOOL)

    def permute(self, x, axes):
        return self._moved(strided.permute, x, axes)

    def strided(self, x, shape, strides, offset):
        return self._moved(strided.strided, x, shape, strides, offset)

    def strided_backward(self, g, size, strides, offset, out=None):
        dev = self.device
        if g.dtype != BOOL:
            return strided.strided_backward(dev, g, size, strides, offset, out)
        words = strided.strided_backward(dev, logic.cast(dev, g, INT32), size, strides, offset,
                                         None if out is None else logic.cast(dev, out, INT32))
        return logic.cast(dev, words, BOOL, out)

    def matmul(self, a, b, trans_a=False, trans_b=False, out=None, epilogue=PLAIN, low=None,
               result=None):
        return matmul.matmul(self.device, a, b, trans_a, trans_b, out, epilogue, low, result)

    def softmax(self, x):
        return softmax.softmax(self.device, x)

    def log_softmax(self, x):
        return softmax.log_softmax(self.device, x)

    def softmax_backward(self, y, g):
        return softmax.softmax_backward(self.device, y, g)

    def log_softmax_backward(self, y, g):
        return softmax.log_softmax_backward(self.device, y, g)

    def softmax_cross_entropy(self, logits, targets, grad=None):
        return softmax.softmax_cross_entropy(self.device, logits, targets, grad)

    def softmax_cross_entropy_backward(self, logits, targets, lse, g):
        return softmax.softmax_cross_entropy_backward(self.device, logits, targets, lse, g)

    def layer_norm(self, x, gamma, beta, eps):
        return layernorm.layer_norm(self.device, x, gamma, beta, eps)

    def layer_norm_backward(self, x, gamma, mean, rstd, g, out=(None, None)):
        return layernorm.layer_norm_backward(self.device, x, gamma, mean, rstd, g, out)

    def embedding(self, table, idx):
        return self._moved(embedding.embedding, table, idx)

    def embedding_backward(self, idx, g, num_rows, out=None):
        return embedding.embedding_backward(self.device, idx, g, num_rows, out)

    def logic(self, op, x, y=None):
        return logic.logic(self.device, op, x, y)

    def integer(self, op, x, y=None):
        return logic.integer(self.device, op, x, y)

    def int_reduce(self, op, x, outer, n, inner):
        return logic.int_reduce(self.device, op, x, outer, n, inner)

    def where(self, cond, a, b):
        if a.dtype == BOOL:             # (bool values: where's selections of words)
            dev = self.device
            words = logic.where(dev, cond, logic.cast(dev, a, INT32), logic.cast(dev, b, INT32))
            return logic.cast(dev, words, BOOL)
        return logic.where(self.device, cond, a, b)

    def cast(self, x, dtype, out=None):
        return logic.cast(self.device, x, dtype, out)

    def argreduce(self, op, x, outer, n, inner):
        return argreduce.argreduce(self.device, op, x, outer, n, inner)

    def cumsum(self, x, outer, n, inner, reverse):
        return scan.cumsum(self.device, x, outer, n, inner, reverse)

    def cumprod(self, x, outer, n, inner, reverse):
        return scan.cumprod(self.device, x, outer, n, inner, reverse)

    def searchsorted(self, rows, values, n, m, shared, right):
        return search.searchsorted(self.device, rows, values, n, m, shared, right)

    def sort(self, x, descending):
        return sort.sort(self.device, x, descending)

    def unfold(self, x, kernel, dilation, padding, stride, out_size, value):
        return unfold.unfold(self.device, x, kernel, dilation, padding, stride, out_size,
                             value)

    def fold(self, cols, size, kernel, dilation, padding, stride, out_size):
        return unfold.fold(self.device, cols, size, kernel, dilation, padding, stride,
                           out_size)

    def conv2d(self, x, weight, dilation, padding, stride, out_size, low=None):
        return conv.conv2d(self.device, x, weight, dilation, padding, stride, out_size, low)

    def conv2d_weight(self, x, g, kernel, dilation, padding, stride, low=None):
        return conv.conv2d_weight(self.device, x, g, kernel, dilation, padding, stride, low)

    def conv2d_input(self, g, weight, size, dilation, padding, stride, low=None):
        return conv.conv2d_input(self.device, g, weight, size, dilation, padding, stride,
                                 low)

    def max_pool(self, x, kernel, dilation, padding, stride, out_size):
        return unfold.max_pool(self.device, x, kernel, dilation, padding, stride, out_size)

    def attention(self, q, k, v, causal, scale):
        return attention.attention(self.device, q, k, v, causal, scale)

    def attention_backward(self, q, k, v, o, lse, g, causal, scale):
        return attention.attention_backward(self.device, q, k, v, o, lse, g, causal, scale)

    def attention_packed(self, qkv, heads, causal, scale):
        return attention.attention_packed(self.device, qkv, heads, causal, scale)

    def attention_packed_backward(self, qkv, o, lse, g, heads, causal, scale):
        return attention.attention_packed_backward(self.device, qkv, o, lse, g, heads,
                                                   causal, scale)

    def gather(self, x, idx, skip):
        return self._moved(gather.gather, x, idx, skip)

    def gather_backward(self, idx, g, cols, skip):
        return gather.gather_backward(self.device, idx, g, cols, skip)

    def dropout(self, x, p, seed, step):
        return dropout.dropout(self.device, x, p, seed, step)

    def optim_step(self, rule, w, g, state, hyper) -> None:
        optim.optim_step(self.device, rule, w, g, state, hyper)

    def optim_steps(self, rule, params, hyper) -> None:
        optim.optim_steps(self.device, rule, params, hyper)
