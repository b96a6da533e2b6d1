"""Ops on float16 and bfloat16 tensors: each computes in float32 and rounds its result.

An op given a 16-bit tensor widens it to float32 (exactly), runs its float32 kernels and,
where every float tensor it was given is of that one 16-bit type, rounds its float results
back to it (to nearest even); beside a float32 tensor, or with both 16-bit types, the
result stays float32 (float64 beside a float64 tensor: PyTorch's promotion). As in
PyTorch, a 0-d float tensor beside tensors with dimensions does not promote them: x16 +
a 0-d float32 tensor is 16-bit, as x16 + a number is, and like the number (rounded to x16's
type first, through float32, as PyTorch casts them: a bfloat16 256 + 1.001 is 256 + 1.0,
which rounds to even, 256) the 0-d tensor is rounded to that type first. That is what
PyTorch's kernels do for these types (they compute in float, the "opmath" type, and round
once), so the values match PyTorch's wherever its float32 ones match ours; on both
backends the widening and rounding are the same bits, and the differential checks bound a
16-bit result by the float32 op's bound plus one unit in the last place of the 16-bit
type.

Gradients flow through both conversions: a 16-bit tensor's gradient is 16-bit (rounded
where it crosses back, as PyTorch's is), and gradients meeting at a 16-bit tensor are
added in float32 and rounded (the binary kernels take 16-bit operands of one shape).

The unary ops (``exp``, ``gelu``, ``clamp``, ...; ``x * 2.0``: not wrapped) and the
binary ones of two tensors of one type and one shape run their kernels on the 16-bit
storage itself (``Backend.unary``, ``Backend.binary``), so no float32 copy is made or
kept; so do the fused attention kernels, and the products (``matmul``, ``linear``, the
convolutions) keep 16-bit operands of one type as they are, widened only as their kernels
read them (ops.product_type). Under autocast, PyTorch's float32 ops give float32 results
(``autocast.FLOAT32_OPS``). The rest find out cheaply: ``refuse_low_precision`` (every
op's argument check) raises ``LowPrecisionInput`` on a 16-bit tensor, and
``computes_in_float32`` (around each public op) catches it and runs the op again on
widened copies. An argument check comes before any state changes, so the first attempt
leaves nothing behind. (The optimizers refuse 16-bit parameters themselves: their updates
are float32 and float64 kernels.)
"""
from __future__ import annotations

import functools

import numpy as np

from ..errors import ArgumentTypeError
from . import autocast, device, tape
from .residency import adopt, handle
from .tensor import DEFAULT_DTYPE, LOW_PRECISION, Tensor, is_floating

FLOAT64 = np.dtype(np.float64)


class LowPrecisionInput(ArgumentTypeError):
    """An op was given a float16 or bfloat16 tensor (caught by ``computes_in_float32``;
    where an op is not wrapped, the user's error)."""


def refuse_low_precision(fn: str, name: str, t: Tensor) -> None:
    """Raise ``LowPrecisionInput`` where an op is given a float16 or bfloat16 tensor.
    (Every op asks, so it asks cheaply: they are the only tensors of 2-byte elements.)"""
    if t.dtype.itemsize == 2:
        raise LowPrecisionInput(f"{fn}: argument '{name}' is a {t.dtype} tensor, which "
                                f"{fn} does not take (convert it with .float())")


def converted(backend, t: Tensor, dtype) -> Tensor:
    """``t`` converted to the float type ``dtype``, recorded: its gradient converts back.
    (One 16-bit type to the other goes through float32: exact, then one rounding.)"""
    source = t.dtype

    def cast(h, to, out=None):
        if h.dtype.itemsize == 2 and to.itemsize == 2 and h.dtype != to:
            h = backend.cast(h, DEFAULT_DTYPE)
        return backend.cast(h, to, out)

    def backward(g, needs):           # (a leaf's first gradient: written in its storage)
        return (cast(g, source, tape.into(needs[0])),)
    out = adopt(backend, Tensor(t.shape, dtype), cast(handle(backend, t), np.dtype(dtype)))
    return tape.record(out, (t,), backward, backend)


def computes_in_float32(fn):
    """``fn`` (a public op) made to take float16 and bfloat16 tensors as the module's
    docstring says. (An op built of others checks its own arguments before it calls
    them, so that it, the outermost, rounds once at its end.)"""
    @functools.wraps(fn)
    def op(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except LowPrecisionInput:
            pass             # (retried outside the handler: its errors do not chain to this)
        return _in_float32(fn, args, kwargs)
    return op


def in_input_type(fn):
    """A normalisation (``fn``: batch_norm, group_norm, layer_norm, rms_norm) of a 16-bit
    input beside float32 parameters or statistics gives the input's type (its float32
    result rounded once), as PyTorch's mixed-type kernels do, unless autocast keeps the op
    in float32."""
    @functools.wraps(fn)
    def op(input, *args, **kwargs):  # noqa: A002 - PyTorch's name
        out = fn(input, *args, **kwargs)
        low = input.dtype if isinstance(input, Tensor) else None
        if low in LOW_PRECISION and isinstance(out, Tensor) and out.dtype == DEFAULT_DTYPE \
                and not autocast.keeps_float32(fn.__name__):
            return converted(device.active(), out, low)
        return out
    return op


def _in_float32(fn, args: tuple, kwargs: dict):
    backend = device.active()
    kinds, scalars = set(), set()     # the float types given (of tensors with dimensions)
    _float_kinds(args, kinds, scalars)
    _float_kinds(kwargs.values(), kinds, scalars)
    kinds = kinds or scalars
    # (beside a float64 tensor, as float64: PyTorch's promotion; exact either way)
    wide = FLOAT64 if FLOAT64 in kinds else DEFAULT_DTYPE
    low = next(iter(kinds)) if len(kinds) == 1 else None

    def widened(v):
        if isinstance(v, Tensor):
            if low in LOW_PRECISION and v.ndim == 0 and v.dtype != low and \
                    is_floating(v.dtype):
                v = converted(backend, v, low)   # (PyTorch casts it to the result's type)
            if v.dtype in LOW_PRECISION:
                v = converted(backend, v, DEFAULT_DTYPE)
                return v if wide == DEFAULT_DTYPE else converted(backend, v, wide)
            return v
        if type(v) in (list, tuple):            # (concat, stack: tensors in a sequence)
            return type(v)(widened(item) for item in v)
        return v
    out = fn(*[widened(a) for a in args], **{k: widened(v) for k, v in kwargs.items()})
    if low not in LOW_PRECISION or autocast.keeps_float32(fn.__name__):
        return out
    return _narrowed(backend, out, low)


def _float_kinds(values, kinds: set, scalars: set) -> None:
    """The float types of the tensors among ``values`` into kinds (0-d ones into
    scalars)."""
    for v in values:
        if isinstance(v, Tensor):
            if is_floating(v.dtype):
                (kinds if v.ndim else scalars).add(v.dtype)
        elif type(v) in (list, tuple):
            _float_kinds(v, kinds, scalars)


def _narrowed(backend, out, low):
    """``out``'s float32 tensors (in tuples, named ones too, and lists) rounded to ``low``;
    the rest (indices, masks) as they are."""
    if isinstance(out, Tensor):
        return converted(backend, out, low) if out.dtype == DEFAULT_DTYPE else out
    if isinstance(out, tuple):
        items = [_narrowed(backend, item, low) for item in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if isinstance(out, list):
        return [_narrowed(backend, item, low) for item in out]
    return out
