"""In-place tensor methods under PyTorch's names: ``t.zero_()``, ``t.fill_(v)``,
``t.copy_(src)``, ``t.add_(other, alpha=)``, ``t.mul_()``, ``t.clamp_()``, ``t.lerp_()``,
``t.addcmul_()``, ``t.uniform_()``, ... each writes its result into the tensor's own storage
(the same device buffer: a parameter stays resident, a view made by ``detach()`` or
``reshape`` shares the write, as in PyTorch) and returns the tensor.

The value is computed first by the out-of-place op of the same name, then converted to the
tensor's dtype, broadcast to its shape and copied in, so a failing call changes nothing.
They run outside ``with_grad_tape()`` only: the tape keeps the values its backward pass
reads, not copies, and has no version counters to notice one written under it (PyTorch
raises at backward; here the write is refused up front). Outside a tape nothing is
recorded, so a parameter may be written there (PyTorch asks for ``no_grad()`` for that).
Slices (``t[0]``) are copies in dualgrad, so writing into one leaves ``t`` as it was;
``t[key] = value`` writes into t itself, as PyTorch's.
``t.data`` is PyTorch's too: the storage as a tensor without history, whose in-place
methods write into t; ``t.data = value`` writes value in (of t's shape).
"""
from __future__ import annotations

import numpy as np

from ..errors import (ArgumentTypeError, CallOrderError, DualgradError, ShapeError,
                      bad_type, bad_value)
from . import checks, device, init, ops, tape
from .indexing import _basic, _expand_ellipsis, broadcast_to, getitem
from .logic import masked_fill, to
from .placement import replaced
from .pointwise import addcmul, addcdiv
from .residency import handle
from .tensor import Tensor, ag_tensor, is_float


def _writable(fn: str, t: Tensor) -> None:
    if tape._local.open:
        raise CallOrderError(f"{fn}: in-place ops run outside with_grad_tape() (the tape "
                             "keeps values its backward pass reads, which the write would "
                             "change); do it after the block, or use the op that returns a "
                             "new tensor")


def write(fn: str, t: Tensor, value, any_dtype: bool = False) -> Tensor:
    """Copy ``value`` (a tensor, converted to t's dtype and broadcast to its shape) into
    t's storage; returns t. A float value goes into an integer tensor only with
    ``any_dtype`` (copy_'s conversion, as PyTorch's)."""
    if not _broadcasts(value.shape, t.shape):
        raise ShapeError(f"{fn}: the result's shape {value.shape} does not broadcast to the "
                         f"tensor's {t.shape}")
    value = broadcast_to(value, t.shape) if value.shape != t.shape else value
    if value.dtype != t.dtype:
        if is_float(value.dtype) and not is_float(t.dtype) and not any_dtype:
            raise ArgumentTypeError(f"{fn}: the result is {value.dtype}, which the {t.dtype} "
                                    "tensor cannot hold in place (convert the tensor first)")
        value = to(value, t.dtype)
    backend = device.active()
    backend.copy(handle(backend, t), handle(backend, value))
    t.written()
    return t


def _broadcasts(shape: tuple, target: tuple) -> bool:
    """Whether ``shape`` broadcasts to ``target`` (and only to it)."""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _method(name: str, compute):
    """``t.<name>(*args)``: compute(t, *args) written into t."""
    def method(self, *args, **kwargs):
        _writable(name, self)
        return write(name, self, compute(self, *args, **kwargs))
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In place: ``t = {name[:-1]}(t, ...)``, written into t's storage."
    return method


def _fill_(self, value):
    """Every element ``value`` (filled on the device: nothing uploaded); returns self."""
    _writable("fill_", self)
    if isinstance(value, Tensor):
        if value.size != 1:
            raise ShapeError(f"fill_: argument 'value' has shape {value.shape}; expected one "
                             "element")
        return write("fill_", self, ops.reshape(to(value, self.dtype), ()))
    if not checks.is_number(value) and not isinstance(value, (bool, np.bool_)):
        raise bad_type("fill_", "value", value, "a number")
    value = _number("fill_", value, self.dtype)
    backend = device.active()
    backend.fill(handle(backend, self), value)
    self.written()
    return self


def _zero_(self):
    """Every element 0; returns self."""
    return _fill_(self, 0)


def _copy_(self, src):
    """src's values (a tensor or an array, broadcast to self's shape, converted to its
    dtype) written into self; returns self."""
    _writable("copy_", self)
    if not isinstance(src, Tensor):
        src = ops._tensor("copy_", "src", src, self if is_float(self.dtype) else None,
                          any_dtype=True, low_precision=True)
    return write("copy_", self, src, any_dtype=True)


def _get_data(self):
    """PyTorch's ``t.data``: t's storage as a tensor with no history (``t.detach()``), so
    ``p.data.mul_(0.5)`` or ``p.weight.data.normal_(0, 0.02)`` writes into t."""
    return self.detach()


def _set_data(self, value):
    """``t.data = value``: value's elements written into t's storage, as ``t.copy_(value)``
    outside the tape. PyTorch would also take another shape and dtype, making t a new
    tensor; here the shape must be t's (its dtype is converted), so the storage a
    parameter, its optimizer and its views share stays one."""
    _writable("data", self)
    shape = getattr(value, "shape", np.shape(value))
    if tuple(shape) != self.shape:
        raise ShapeError(f"data: argument 'value' has shape {tuple(shape)}; expected the "
                         f"tensor's {self.shape} (values are written into its storage; "
                         "make a new tensor for another shape)")
    _copy_(self, value)


def _setitem(self, key, value) -> None:
    """``t[key] = value``, as PyTorch's: value (a number, an array or a tensor, converted
    to t's dtype) broadcast to the shape ``t[key]`` has, written into t's storage there.
    Ints, slices, None and ``...`` write the strided part in place (one kernel over the
    part); a boolean mask with a number is ``masked_fill``; integer index arrays, and a
    mask with values, read the selected positions back to the host (PyTorch waits for a
    mask's count too) and write the whole tensor once. Where an index array repeats a
    position, its last value is the one written (PyTorch leaves which one unspecified)."""
    _writable("setitem", self)
    try:
        _set(self, key, value)
    except DualgradError as e:          # (the key is read by getitem's code: name ours)
        if not str(e).startswith("getitem:"):
            raise
        raise type(e)("setitem:" + str(e)[len("getitem:"):]) from None


def _set(self, key, value) -> None:
    if isinstance(value, (bool, np.bool_)) or checks.is_number(value):
        value = _number("setitem", value, self.dtype)
    else:
        if not isinstance(value, Tensor):
            value = ops._tensor("setitem", "value", value,
                                self if is_float(self.dtype) else None, any_dtype=True,
                                low_precision=True)
        if value.dtype != self.dtype:
            value = to(value, self.dtype)
    parts = key if isinstance(key, tuple) else (key,)
    if _basic_key(parts) and self.dtype in _STRIDED_DTYPES:
        return _write_strided(self, parts, value)
    if len(parts) == 1 and _is_mask(parts[0]) and not isinstance(value, Tensor):
        mask = parts[0] if isinstance(parts[0], Tensor) else \
            ag_tensor(np.asarray(parts[0]), dtype="bool")
        if mask.ndim and mask.shape == self.shape[:mask.ndim]:
            mask = ops.reshape(mask, mask.shape + (1,) * (self.ndim - mask.ndim))
            write("setitem", self, masked_fill(self, mask, value))
            return None
    return _write_positions(self, key, value)


_STRIDED_DTYPES = {np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32),
                   np.dtype(np.bool_)}


_FILLED_DTYPES = {np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_)}


def _basic_key(parts: tuple) -> bool:
    return all(k is None or k is Ellipsis or isinstance(k, slice) or
               (checks.is_number(k) and not isinstance(k, (bool, np.bool_, float)))
               for k in parts)


def _is_mask(k) -> bool:
    kind = k.dtype.kind if isinstance(k, (Tensor, np.ndarray)) else None
    return kind == "b"


def _number(fn: str, value, dtype):
    """A number as a ``dtype`` tensor holds it, converted as PyTorch converts: truncated
    toward 0 into int32, nonzero is True."""
    if dtype == np.bool_:
        return bool(value)
    if dtype == np.int32:
        return checks.int32_value(fn, "value", value)
    return float(value)


def _as_values(fn: str, value, dtype, shape) -> Tensor:
    """value as a tensor of ``dtype`` broadcast to ``shape``; a number filled on the device
    (nothing uploaded: a captured step replays the write), converted as PyTorch's are."""
    if not isinstance(value, Tensor):
        if dtype in _FILLED_DTYPES:
            return ops._constant(tuple(shape), value, dtype)
        value = ag_tensor(np.asarray(value), dtype=str(dtype))      # (16-bit, float64)
    shape = tuple(shape)
    if not _broadcasts(value.shape, shape):
        raise ShapeError(f"{fn}: argument 'value' has shape {value.shape}; expected a shape "
                         f"that broadcasts to the selection's {shape}")
    return broadcast_to(value, shape) if value.shape != shape else value


def _write_strided(t: Tensor, parts: tuple, value) -> None:
    """The strided part of t that ``parts`` selects, written in place."""
    shape, strides, offset, _ = _basic(t, _expand_ellipsis(parts, t.ndim))
    values = _as_values("setitem", value, t.dtype, shape)
    if not values.size:
        return
    backend = device.active()
    backend.strided_backward(handle(backend, values), t.size, tuple(strides), offset,
                             out=handle(backend, t))
    t.written()


def _write_positions(t: Tensor, key, value) -> None:
    """t[key] = value by the positions t[key] selects: a tensor of positions indexed as t
    would be, read back; the last value a position is given wins (``placement.replaced``:
    t rebuilt whole by one index_select over its elements followed by the values)."""
    flat_positions = ag_tensor(np.arange(t.size, dtype=np.int32).reshape(t.shape),
                               dtype="int32")
    selected = getitem(flat_positions, key)
    positions = selected.numpy().reshape(-1).astype(np.int64)
    values = _as_values("setitem", value, t.dtype, selected.shape)
    if positions.size:
        write("setitem", t, replaced(t.detach(), positions, values))


def _random(name: str, draw):
    def method(self, *args, **kwargs):
        _writable(name, self)
        if not is_float(self.dtype):
            raise ArgumentTypeError(f"{name}: the tensor is {self.dtype}; expected a float "
                                    "tensor")
        return draw(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"In place, as ``dg.nn.init.{name}``: values drawn from dualgrad's " \
                     "generator (``manual_seed``)."
    return method


_COMPUTED = {
    "add_": ops.add,                    # (alpha=: a + alpha b, as PyTorch's)
    "sub_": ops.sub,
    "mul_": ops.mul,
    "div_": ops.div,
    "pow_": ops.pow,
    "clamp_": ops.clamp,
    "clip_": ops.clamp,
    "neg_": ops.neg,
    "abs_": ops.abs,
    "exp_": ops.exp,
    "log_": ops.log,
    "sqrt_": ops.sqrt,
    "sigmoid_": ops.sigmoid,
    "tanh_": ops.tanh,
    "relu_": ops.relu,
    "lerp_": ops.lerp,
    "addcmul_": addcmul,
    "addcdiv_": addcdiv,
    "masked_fill_": masked_fill,
}


def install() -> None:
    """Give Tensor the in-place methods (a name it has already is kept)."""
    methods = {name: _method(name, fn) for name, fn in _COMPUTED.items()}
    methods.update(fill_=_fill_, zero_=_zero_, copy_=_copy_,
                   uniform_=_random("uniform_", init.uniform_),
                   normal_=_random("normal_", init.normal_))
    for name, method in methods.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, method)
    Tensor.data = property(_get_data, _set_data, doc=_get_data.__doc__)
    Tensor.__setitem__ = _setitem
