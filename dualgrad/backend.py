"""The backend contract: the primitives the front end calls, one set per backend.

The front end (``dualgrad.api``) holds autograd, the gradient rules, optimizers, layers and
the residency policy, and never asks which backend is active: it calls these methods on
``active()``. A backend implements them over its own *storage handles*, a C-contiguous NumPy
array on cpu, a sub-allocated device buffer on gpu, and never sees a Tensor. A handle has
``.shape`` and ``.dtype``; a device handle also ``.scope`` ("pass" or "persistent") and
``.live``.

Kernels never see autograd either. Every kernel has a twin with the same name on the other
backend, and the differential tests hold each pair together within ``dualgrad.testing``'s
tolerance table. The ops' codes and the optimizers' scalar names are ``dualgrad.kernel_ops``.
"""
from __future__ import annotations

import abc

import numpy as np

from .shapes import keepdims_shape, reduced_shape, reduction_layout

# Pass storage comes in slots a thread switches between: what a tape computes, what a
# no_grad() block outside any tape computes (an evaluation), each freed when the next block
# of its kind begins, and the scratch of a checkpointed function (dg.checkpoint), freed as
# soon as its result is copied out.
TAPE, EVAL, SCRATCH = 0, 1, 2


class Epilogue:
    """What a matrix product does to C as it stores it, in this order: add ``bias`` (one
    value per column; one float32 addition, as binary("add") would make it), then apply
    relu (``relu``), then keep it where ``mask`` (storage of C's shape) is > 0, else 0 (the
    gradient through a relu whose output is the mask: unary_backward("relu", mask, mask,
    C)). ``row_sums`` (storage of op(a)'s shape less its last axis): op(a)'s row sums are
    written there too, as reduce("sum") of them (a linear layer's bias gradient beside its
    weight gradient). ``kind`` is what a kernel's recipe depends on."""

    __slots__ = ("bias", "relu", "mask", "row_sums", "kind")

    def __init__(self, bias=None, relu: bool = False, mask=None, row_sums=None):
        self.bias, self.relu, self.mask, self.row_sums = bias, relu, mask, row_sums
        self.kind = (bias is not None, relu, mask is not None, row_sums is not None)


PLAIN = Epilogue()                 # a product stored as it is


def mixed_side(a, b) -> int:
    """For ``binary`` of storage ``a`` and ``b`` of different dtypes: 1 where b is the
    16-bit one, 2 where a is (the other float32, one shape: a float32 result). Raises
    InvalidValueError for any other mix."""
    f32 = np.dtype(np.float32)
    if a.shape == b.shape and f32 in (a.dtype, b.dtype) and \
            (a.dtype if b.dtype == f32 else b.dtype).itemsize == 2:
        return 1 if a.dtype == f32 else 2
    from .errors import InvalidValueError
    raise InvalidValueError(f"binary: operands of {a.dtype} {tuple(a.shape)} and {b.dtype} "
                            f"{tuple(b.shape)} (expected one type, or float32 beside a "
                            "16-bit type of the same shape)")


class Backend(abc.ABC):
    """Abstract base of the cpu and gpu backends."""

    name: str = "?"
    # Whether storage handles are host arrays: a tensor's storage is then its host value
    # (``_host``), and nothing is ever moved or rescued.
    host_storage: bool = False

    # -- storage ----------------------------------------------------------------------------
    @abc.abstractmethod
    def supports(self, dtype: np.dtype) -> bool:
        """Whether storage of this dtype can live on this backend."""

    @abc.abstractmethod
    def owns(self, h) -> bool:
        """Whether ``h`` is live storage of this backend (not freed, not another's)."""

    @abc.abstractmethod
    def empty(self, shape: tuple, dtype: np.dtype, persistent: bool = False):
        """Uninitialised storage (``persistent``: in the pool tapes do not free)."""

    @abc.abstractmethod
    def upload(self, array: np.ndarray, persistent: bool = False):
        """New storage holding a copy of a C-contiguous host array."""

    @abc.abstractmethod
    def write(self, h, array: np.ndarray) -> None:
        """Overwrite existing storage with a host array of the same shape, in place."""

    @abc.abstractmethod
    def download(self, h) -> np.ndarray:
        """A host copy of the storage's value."""

    @abc.abstractmethod
    def indices(self, array: np.ndarray):
        """Storage for integer indices (class targets, embedding ids), already validated."""

    @abc.abstractmethod
    def fill(self, h, value: float) -> None:
        """Set every element to ``value``, in place (on float16 or bfloat16 storage,
        ``value`` rounded to float32, then to its type, as every conversion to them)."""

    @abc.abstractmethod
    def copy(self, dst, src) -> None:
        """Copy ``src`` into ``dst`` (same size), in place."""

    @abc.abstractmethod
    def reshape(self, h, shape: tuple):
        """The same elements read with another shape (no copy)."""

    # -- host exchange (gradients all-reduced across processes) ----------------------------
    @abc.abstractmethod
    def host_buffer(self, size: int, dtype: np.dtype, array: np.ndarray | None = None):
        """A buffer of ``size`` elements in host memory that ``stage_out`` and ``stage_in``
        copy through: ``.array`` is its one-dimensional NumPy view, ``close()`` frees it.
        ``array`` (one-dimensional, of that size and dtype): host memory to use as the
        buffer where the backend can copy into it directly (the cpu can); otherwise the
        buffer is memory of its own (``.array is not array``). On a device it is
        host-visible memory the device copies into and out of directly, so the host may
        work on one buffer while the device runs on."""

    @abc.abstractmethod
    def stage_out(self, pieces, buffer, then=None):
        """Copy each ``(storage, element offset)`` of ``pieces`` into ``buffer`` once the
        work recorded so far has run. Returns the landing: its ``wait(timeout)`` returns
        True once the copies are in ``buffer.array`` (False if ``timeout`` seconds passed
        first); another thread may wait on it. Each buffer has one landing at a time: wait
        for it before staging out through the same buffer again. ``then(landing)`` is
        called once the copies are on their way: at once, or, in a step being recorded
        (``record``), at that point of every run of the recording."""

    @abc.abstractmethod
    def stage_in(self, buffer, pieces, before=None) -> None:
        """Copy ``buffer``'s elements at each ``(storage, element offset)`` of ``pieces``
        into the storage, after the work recorded so far. ``before()`` is called first
        (the host finishes with ``buffer.array`` there): at once, or, in a step being
        recorded, at that point of every run, the work before it submitted."""

    # -- pools, counters --------------------------------------------------------------------
    def begin_pass(self, slot: int) -> None:
        """Free the calling thread's pass storage of ``slot`` (TAPE or EVAL) and put new pass
        storage there from now on."""

    def use_pass(self, slot: int) -> None:
        """Put the calling thread's new pass storage in ``slot``, freeing nothing."""

    def release(self) -> None:
        """Give the device up: free every pool (the front end has rescued what it keeps)."""

    def memory(self) -> dict:
        """Pool statistics in the keys of ``dg.tape_mem()``."""
        return dict(buffer_bytes=0, n_buffers=0, peak_bytes=0, p_buffer_bytes=0,
                    p_n_buffers=0, reserved_bytes=0, p_reserved_bytes=0)

    def reset_peak_memory(self) -> None:
        """Start ``memory()``'s ``peak_bytes`` again from the bytes in use now."""

    def synchronize(self) -> None:
        """Wait until every op called so far has finished (the cpu's have on return)."""

    def transfers(self) -> dict:
        """Transfer counters in the keys of ``dg.transfer_stats()``."""
        return dict(h2d_bytes=0, h2d_calls=0, d2h_bytes=0, d2h_calls=0, submits=0)

    def reset_transfers(self) -> None:
        """Zero the transfer counters."""

    # -- step capture -----------------------------------------------------------------------
    def record(self, args: list):
        """Begin recording a training step whose arguments are the host arrays ``args``;
        return the recording (see ``dualgrad.gpu.capture.Recording``), or None where steps
        are not recorded (each replay then runs the step again, as on the cpu)."""
        return None

    def replay_dropout(self, recorded: tuple, seed: int, step: int) -> None:
        """Before a replay: the dropout mask recorded with (seed, step) ``recorded`` is
        drawn with ``seed`` and ``step`` this time. Nothing to do where steps are not
        recorded."""

    # -- kernels ----------------------------------------------------------------------------
    @abc.abstractmethod
    def unary(self, op: str, x, a: float = 0.0, b: float = 0.0, out=None):
        """Elementwise op(x); a, b are the op's scalar parameters (clamp bounds, scalars).
        x may be float16 or bfloat16 storage: the result is of its type, each element
        widened to float32, computed on in float32 and rounded to nearest even."""

    @abc.abstractmethod
    def unary_backward(self, op: str, x, y, g, a: float = 0.0, b: float = 0.0, out=None):
        """dL/dx of y = op(x), given g = dL/dy; into ``out`` (storage of g's size, which
        may be g's own, returned) where given. x, y and g all float16 or all bfloat16:
        as ``unary``'s, the result of their type."""

    @abc.abstractmethod
    def binary(self, op: str, a, b, out=None):
        """a op b with NumPy broadcasting (up to MAX_RANK dimensions; the kernels take 4-D
        pieces, ``shapes.pieces``); ``out`` may alias ``a``. a and b may be float16 or
        bfloat16 storage of one type and one shape: the result is of their type, as
        ``unary``'s; or of one shape, one float32 and the other 16-bit (``mixed_side``):
        the 16-bit one widened, the result float32."""

    @abc.abstractmethod
    def binary_backward(self, op: str, a, b, g):
        """(dL/da, dL/db), both in the broadcast shape; of a, b and g of one 16-bit type
        and one shape, of that type."""

    # The reduction kernels index 4 dimensions; a wider tensor's reduction is read as a
    # 4-dimensional one (the helpers below), both backends the same way.
    def _in_four(self, x, axes: tuple) -> tuple:
        """(x, axes) as a reduction of at most 4 dimensions, and the permutation applied
        first (None where reshaping sufficed)."""
        perm, shape, folded_axes = reduction_layout(tuple(x.shape), tuple(axes))
        return self.reshape(self.permute(x, perm) if perm else x, shape), folded_axes, perm

    def wide_reduce(self, op: str, x, axes: tuple, keepdims: bool, center=None,
                    divisor=None):
        """``reduce`` of x of more than 4 dimensions."""
        x4, axes4, _ = self._in_four(x, axes)
        if center is not None:
            center = self.reshape(center, keepdims_shape(tuple(x4.shape), axes4))
        y = self.reduce(op, x4, axes4, keepdims=True, center=center, divisor=divisor)
        return self.reshape(y, reduced_shape(tuple(x.shape), tuple(axes), keepdims))

    def wide_reduce_backward(self, op: str, x, y, g, axes: tuple):
        """``reduce_backward`` of x of more than 4 dimensions."""
        x4, axes4, perm = self._in_four(x, axes)
        kept = keepdims_shape(tuple(x4.shape), axes4)
        dx = self.reduce_backward(op, x4, self.reshape(y, kept), self.reshape(g, kept), axes4)
        if perm is None:
            return self.reshape(dx, tuple(x.shape))
        dx = self.reshape(dx, tuple(x.shape[d] for d in perm))
        return self.permute(dx, tuple(int(d) for d in np.argsort(perm)))

    @abc.abstractmethod
    def reduce(self, op: str, x, axes: tuple, keepdims: bool = False, out=None, center=None,
               divisor=None):
        """An op of ``kernel_ops.REDUCE`` over ``axes`` (non-negative, sorted), into ``out``
        (storage of the result's size, returned) where given. ``center`` (sum_squares and
        sum_exp only; the keepdims shape): the sum of (x - center)^2 or of exp(x - center),
        x - center formed as each element is read. ``divisor`` (var only, a float): var is
        the sum of (x - mean)^2 over each output's elements, about their own mean, divided
        by it (0 gives inf, or NaN for a zero sum)."""

    @abc.abstractmethod
    def reduce_backward(self, op: str, x, y, g, axes: tuple):
        """dL/dx of y = reduce(op, x, axes, keepdims=True), given g (keepdims shape), for the
        ops of ``kernel_ops.REDUCE_BACKWARD``."""

    @abc.abstractmethod
    def permute(self, x, axes: tuple):
        """A contiguous copy of x with its axes permuted."""

    @abc.abstractmethod
    def strided(self, x, shape: tuple, strides: tuple, offset: int):
        """A contiguous array of ``shape`` whose element i (coordinates c) is x's flat
        element offset + sum(c[d] * strides[d]); strides may be negative or 0."""

    @abc.abstractmethod
    def strided_backward(self, g, size: int, strides: tuple, offset: int, out=None):
        """The gradient of an injective ``strided`` read of an x of ``size`` elements: a 1-D
        array of zeros with g's element i written at offset + sum(c[d] * strides[d]); with
        ``out`` (storage of ``size`` elements), g's elements are written into it there and
        the rest of it is left as it is (concatenation)."""

    @abc.abstractmethod
    def matmul(self, a, b, trans_a: bool = False, trans_b: bool = False, out=None,
               epilogue: Epilogue = PLAIN, low=None, result=None):
        """op(a) @ op(b), 2-D or batched 3-D; a 2-D operand is shared by the batch; op
        transposes the last two axes where its flag is set. ``epilogue`` says what happens
        to C as it is stored. Into ``out`` (storage of the product's size, returned) where
        given. ``low`` (float16 or bfloat16): the product of a and b rounded to that type
        (nearest even, as ``cast`` rounds), accumulated in float32 (autocast's products;
        the row sums are of the rounded op(a)); a or b may then be storage of that type,
        taken as it is. The product is float32, or with ``result`` (``low``'s type)
        stored in it, each output rounded once after the epilogue."""

    @abc.abstractmethod
    def softmax(self, x):
        """Softmax over the last axis."""

    @abc.abstractmethod
    def log_softmax(self, x):
        """Log-softmax over the last axis."""

    @abc.abstractmethod
    def softmax_backward(self, y, g):
        """dL/dx of y = softmax(x)."""

    @abc.abstractmethod
    def log_softmax_backward(self, y, g):
        """dL/dx of y = log_softmax(x)."""

    @abc.abstractmethod
    def softmax_cross_entropy(self, logits, targets, grad=None):
        """(mean loss of shape (), per-row statistics (rows, 2): the max and the log of
        the sum of exponentials about it) for 2-D logits and index targets;
        ``grad`` (storage of logits' shape), where given, also receives dL/dlogits for
        dL/dloss = 1: what ``softmax_cross_entropy_backward`` makes for g = 1."""

    @abc.abstractmethod
    def softmax_cross_entropy_backward(self, logits, targets, lse, g):
        """dL/dlogits, given g = dL/dloss of shape ()."""

    @abc.abstractmethod
    def layer_norm(self, x, gamma, beta, eps: float):
        """(y, mean, rstd) of layer normalisation over the last axis; ``beta`` None: no
        shift (not a shift by zeros, which would turn -0 into +0)."""

    @abc.abstractmethod
    def layer_norm_backward(self, x, gamma, mean, rstd, g, out=(None, None)):
        """(dx, dgamma, dbeta); ``out``: storage dgamma and dbeta are written into (a
        leaf's first gradient), None for new storage."""

    @abc.abstractmethod
    def embedding(self, table, idx):
        """Rows of ``table`` (any dtype) looked up by ``idx``: shape idx.shape +
        (table.shape[1],). Exact."""

    @abc.abstractmethod
    def embedding_backward(self, idx, g, num_rows: int, out=None):
        """dL/dtable: each looked-up row's gradient added into the row, in position order;
        into ``out`` where given."""

    @abc.abstractmethod
    def gather(self, x, idx, skip: int):
        """out[r, k] = x[r, idx[r, k]] for 2-D x (rows, cols) and 2-D indices (rows, k), and
        0 where idx[r, k] == skip (an ignored target); x of any dtype but the 16-bit ones,
        its bits moved. x may have one row, shared by all."""

    @abc.abstractmethod
    def gather_backward(self, idx, g, cols: int, skip: int):
        """dL/dx of ``gather`` (x of idx.shape[0] rows): zeros with g[r, k] added at
        [r, idx[r, k]] in k order (so sums agree bit for bit between backends), skipping
        idx == skip."""

    @abc.abstractmethod
    def logic(self, op: str, x, y=None):
        """x op y with NumPy broadcasting (``kernel_ops.LOGIC``; both float, both int32 or,
        for the logical ops, both bool), or the test op x for LOGIC_UNARY: bools (a byte
        each, 0 or 1). Exact."""

    @abc.abstractmethod
    def integer(self, op: str, x, y=None):
        """int32 arithmetic (``kernel_ops.INTEGER``): x op y with NumPy broadcasting, or op
        x for INTEGER_UNARY; wrapping; floor division and remainder toward -inf, 0 for a
        zero divisor. Exact."""

    @abc.abstractmethod
    def int_reduce(self, op: str, x, outer: int, n: int, inner: int):
        """op (``kernel_ops.INT_REDUCE``: int_sum, int_max, int_min) of int32 x read as
        (outer, n, inner) along n: int32 (outer * inner,); sums wrap as int32 arithmetic
        does (0 where n is 0; a maximum or minimum needs n >= 1). Exact."""

    @abc.abstractmethod
    def where(self, cond, a, b):
        """a where cond (bools) holds, else b, broadcasting the three; a and b of one
        dtype. Exact."""

    @abc.abstractmethod
    def cast(self, x, dtype, out=None):
        """x converted to ``dtype`` (float32, int32, bool; float64 on backends with it;
        float16 and bfloat16 from and to float32 only): a float to int32 truncates toward
        zero, saturating past int32's range, NaN giving 0; to bool nonzero (NaN too) is 1;
        an int to float rounds to nearest; a float32 to a 16-bit float rounds to nearest
        even (past the largest finite value to inf; NaN stays NaN), and back is exact.
        ``out``: storage of x's shape and ``dtype`` to write it into (a leaf's first
        gradient: tape.Into), returned."""

    @abc.abstractmethod
    def argreduce(self, op: str, x, outer: int, n: int, inner: int):
        """"argmax" or "argmin" of x read as (outer, n, inner) along n (n >= 1): int32
        indices (outer * inner,), the first of ties, a NaN counting as past every number.
        Exact."""

    @abc.abstractmethod
    def cumsum(self, x, outer: int, n: int, inner: int, reverse: bool):
        """The cumulative sums of x read as (outer, n, inner), along n (``reverse``: from
        the end, the gradient's); the float32 sums of a line in any order (within gamma(n)
        of the exact ones); of an int32 x, int32 sums wrapping as int32 does (exact)."""

    @abc.abstractmethod
    def cumprod(self, x, outer: int, n: int, inner: int, reverse: bool):
        """The cumulative products, as ``cumsum``'s sums: float32 products of a line in any
        order (within gamma(n) of the exact ones, relatively); int32 ones wrapping."""

    @abc.abstractmethod
    def searchsorted(self, rows, values, n: int, m: int, shared: bool, right: bool):
        """int32 indices (values.size,): where each value of ``values`` (float32 or int32,
        read as lines of n) goes in its row of ``rows`` (the same dtype, rows of m, one a
        line of values, or one for all where ``shared``): the first position whose element
        is >= the value (> where ``right``), found by PyTorch's binary search, so rows that
        are not sorted give the same answer on both backends; -0 equals +0, comparisons
        with NaN are false (a NaN value's index is m). Exact."""

    @abc.abstractmethod
    def sort(self, x, descending: bool):
        """(values, int32 indices) of the rows of x (rows, n) sorted along n, ascending or
        ``descending``; ties keep their order (a stable sort), -0 ties with +0, NaNs order
        past +inf and among themselves by index. Exact."""

    @abc.abstractmethod
    def unfold(self, x, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple,
               out_size: tuple, value: float):
        """The sliding windows of images x (B, C, H, W) as columns (B, C * kh * kw,
        oh * ow), PyTorch's ``F.unfold`` layout: window (oy, ox) element (i, j) is x at
        oy * stride - padding + i * dilation along each axis (pairs: rows, columns), and
        ``value`` outside x; ``padding`` is the top and left padding, ``out_size`` (oh, ow)
        implies the rest. Exact."""

    @abc.abstractmethod
    def fold(self, cols, size: tuple, kernel: tuple, dilation: tuple, padding: tuple,
             stride: tuple, out_size: tuple):
        """The images (B, C, *size) that ``unfold`` with this geometry reads, each pixel the
        float32 sum, in (i, j) order, of the column elements that read it (``unfold``'s
        gradient). Exact between backends."""

    @abc.abstractmethod
    def conv2d(self, x, weight, dilation: tuple, padding: tuple, stride: tuple,
               out_size: tuple, low=None):
        """The convolution (cross-correlation) of images x (B, C, H, W) with ``weight``
        (O, C, kh, kw): (B, O, oh, ow), each output the weight's row (O, C * kh * kw) times
        a window of ``unfold``'s geometry (padding zeros; it may be negative, windows then
        start inside the image), accumulated in float32 as ``matmul``; no unfolded copy of
        the images need exist. ``low``: x and the weight rounded to that 16-bit type first,
        as ``matmul``'s."""

    @abc.abstractmethod
    def conv2d_weight(self, x, g, kernel: tuple, dilation: tuple, padding: tuple,
                      stride: tuple, low=None):
        """The gradient of ``conv2d`` with respect to its weight: (O, C, kh, kw), the sum
        over images and windows of g (B, O, oh, ow) times the windows of x (B, C, H, W),
        accumulated in float32 as ``matmul``; ``low`` as ``conv2d``'s (g rounded too)."""

    @abc.abstractmethod
    def conv2d_input(self, g, weight, size: tuple, dilation: tuple, padding: tuple,
                     stride: tuple, low=None):
        """The gradient of ``conv2d`` with respect to its images, (B, C, *size), from the
        output's g (B, O, oh, ow) and ``weight`` (O, C, kh, kw) over ``unfold``'s geometry
        (``padding`` >= 0): each pixel the sum of g times the weight elements of every
        window that reads it, its O kh kw terms accumulated in float32 in any order (as
        ``matmul``'s, within gamma(O kh kw) of the exact sum); ``low`` as ``conv2d``'s."""

    @abc.abstractmethod
    def max_pool(self, x, kernel: tuple, dilation: tuple, padding: tuple, stride: tuple,
                 out_size: tuple):
        """For each window of ``unfold``'s geometry over images x (B, C, H, W), the int32
        flat index (y * W + x) of its maximum by PyTorch's rule: the first in-bounds
        element, replaced by each larger one and by each NaN; -1 where no element of the
        window is in bounds. (B, C, oh * ow). Exact."""

    @abc.abstractmethod
    def attention(self, q, k, v, causal: bool, scale: float):
        """(o, lse) of softmax(q k^T * scale) v for q (B, L, D), k and v (B, S, D), S >= 1,
        D <= 128: o (B, L, D) and each row's log-sum-exp of its scaled scores (B, L);
        ``causal``: key j takes part in row i where j <= i. No L x S matrix outlives the
        call. q, k and v of one float16 or bfloat16 type give o of that type (computed in
        float32, rounded once), lse float32; the backward's o and g are of it too, and
        its gradients."""

    @abc.abstractmethod
    def attention_backward(self, q, k, v, o, lse, g, causal: bool, scale: float):
        """(dq, dk, dv) of ``attention`` given g = dL/do, its weights recomputed from
        ``lse``."""

    @abc.abstractmethod
    def attention_packed(self, qkv, heads: int, causal: bool, scale: float):
        """``attention`` of self-attention's projection read in place: qkv (N, L, 3, heads,
        D), its [:, :, 0], [:, :, 1] and [:, :, 2] the queries, keys and values of N *
        heads rows (row n * heads + h), D <= 128; (o (N, L, heads, D), lse (N * heads,
        L))."""

    @abc.abstractmethod
    def attention_packed_backward(self, qkv, o, lse, g, heads: int, causal: bool,
                                  scale: float):
        """The gradient of ``attention_packed`` for qkv, (N, L, 3, heads, D), given g =
        dL/do (N, L, heads, D)."""

    @abc.abstractmethod
    def dropout(self, x, p: float, seed: int, step: int):
        """x * mask / (1 - p), the mask a function of (seed, step, element index) alone; the
        backward of dropout is the same kernel applied to the gradient."""

    @abc.abstractmethod
    def optim_step(self, rule: str, w, g, state: tuple, hyper: dict) -> None:
        """One fused update by ``rule`` (``kernel_ops.OPTIM``) of w and its state tensors in
        place: ``state`` in OPTIM_STATE[rule]'s order (shorter, or None, where the flags
        leave a tensor out); ``hyper`` has OPTIM_HYPER[rule]'s scalars and, set True, the
        OPTIM_FLAGS it uses."""

    @abc.abstractmethod
    def optim_steps(self, rule: str, params, hyper: dict) -> None:
        """optim_step of every (w, g, state) in ``params``, all with the same ``hyper``: the
        same results, in one dispatch where the backend can (an optimizer's parameters)."""


def dropout_threshold(p: float) -> int:
    """The 24-bit cut below which dropout drops an element (both kernels' mask rule: see
    ``dualgrad/cpu/dropout.py``)."""
    return min(int(round(p * (1 << 24))), 1 << 24)


def dropout_scale(p: float, dtype) -> float:
    """What dropout multiplies a kept element by: 1 / (1 - p), rounded to ``dtype``."""
    return float(np.dtype(dtype).type(1.0 / (1.0 - p))) if p < 1.0 else 0.0
