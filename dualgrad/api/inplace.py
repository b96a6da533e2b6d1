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
Slices (``t[0]``) are copies in dualgrad, so writing into one leaves ``t`` as it was.
``t.data`` is PyTorch's too: the storage as a tensor without history, whose in-place
methods write into t; ``t.data = value`` writes value in (of t's shape).
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentTypeError, CallOrderError, ShapeError, bad_type
from . import checks, device, init, ops, tape
from .indexing import broadcast_to
from .logic import masked_fill, to
from .pointwise import addcmul, addcdiv
from .residency import handle
from .tensor import Tensor, is_float


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
    if value.shape != t.shape:
        try:
            shape = np.broadcast_shapes(value.shape, t.shape)
        except ValueError:
            shape = None
        if shape != t.shape:
            raise ShapeError(f"{fn}: the result's shape {value.shape} does not broadcast to "
                             f"the tensor's {t.shape}")
        value = broadcast_to(value, t.shape)
    if value.dtype != t.dtype:
        if is_float(value.dtype) and not is_float(t.dtype) and not any_dtype:
            raise ArgumentTypeError(f"{fn}: the result is {value.dtype}, which the {t.dtype} "
                                    "tensor cannot hold in place (convert the tensor first)")
        value = to(value, t.dtype)
    backend = device.active()
    backend.copy(handle(backend, t), handle(backend, value))
    t.written()
    return t


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
    backend = device.active()
    backend.fill(handle(backend, self), float(value) if is_float(self.dtype) else int(value))
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
