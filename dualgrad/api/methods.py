"""Tensor methods under PyTorch's names, each the public function of the same name (or its
PyTorch equivalent) with the tensor as its first argument: ``t.exp()`` is ``dg.exp(t)``,
``t.transpose(0, 1)`` swaps two axes, ``t.size(1)`` is ``t.shape[1]``. Installed once, by
the package, after every op module has defined its functions (methods a module installs
itself, as ``t.sum`` or ``t.var``, are left as they are)."""
from __future__ import annotations

import math

from ..errors import bad_axis, bad_shape, bad_type, bad_value
from . import checks, device, ops, tape
from .indexing import _axis
from .logic import where
from .residency import adopt, handle
from .tensor import Tensor

# t.<name>(*args) is dg.<name>(t, *args): the elementwise ops and those whose first argument
# is the tensor, with PyTorch's argument order
_SAME_NAME = (
    "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
    "reciprocal", "square", "sign", "floor", "ceil", "trunc", "round", "neg", "sin", "cos",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
    "erfc", "sigmoid", "relu", "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "atan2", "fmod", "remainder", "lerp", "matmul", "clamp", "softmax", "log_softmax",
    "chunk", "split", "roll", "gather", "index_select", "argmax", "argmin", "isnan", "isinf",
    "isfinite", "logical_not", "eq", "ne", "lt", "le", "gt", "ge", "tril", "triu",
    "clip", "movedim", "swapaxes", "swapdims", "outer", "dot", "mv", "mm", "bmm",
    "isclose", "allclose", "equal", "repeat_interleave", "diagonal", "trace", "logaddexp",
    "hypot", "nan_to_num", "addcmul", "addcdiv", "clamp_min", "clamp_max", "scatter_add",
    "logical_and", "logical_or", "logical_xor", "median", "nanmedian", "kthvalue", "quantile",
    "nansum", "nanmean",
    "count_nonzero", "aminmax", "diff", "take_along_dim", "masked_select", "nonzero",
    "argwhere",
)


def _delegate(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = f"``dg.{fn.__name__}(t, ...)``: " + (fn.__doc__ or "").split("\n")[0]
    return method


class _Size(int):
    """A tensor's element count (NumPy's ``size``, an int) that, called as PyTorch's
    ``size()``, gives the shape, or with a dimension its length."""

    def __new__(cls, shape: tuple):
        made = super().__new__(cls, math.prod(shape))
        made.shape = shape
        return made

    def __call__(self, dim=None):
        return self.shape if dim is None else self.shape[_axis("size", "dim", dim,
                                                                len(self.shape))]


def _transpose(self, dim0: int = 0, dim1: int = 1):
    """The tensor with axes ``dim0`` and ``dim1`` swapped, as ``torch.transpose``."""
    axes = list(range(self.ndim))
    d0, d1 = (_axis("transpose", name, d, self.ndim)
              for name, d in (("dim0", dim0), ("dim1", dim1)))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return ops.transpose(self, tuple(axes))


def _permute(self, *dims):
    """The tensor with its axes in the order ``dims``, as ``torch.permute``."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return ops.transpose(self, dims)


def _t(self):
    """The transpose of a tensor of at most 2 dimensions, as ``torch.t``."""
    if self.ndim > 2:
        raise bad_shape("t", "self", self.shape, "at most 2 dimensions")
    return _transpose(self, 0, 1) if self.ndim == 2 else self


def _unbind(self, dim: int = 0) -> tuple:
    """The slices along ``dim``, that axis removed, as ``torch.unbind``."""
    dim = _axis("unbind", "dim", dim, self.ndim)
    return tuple(self[(slice(None),) * dim + (i,)] for i in range(self.shape[dim]))


def _narrow(self, dim: int, start: int, length: int):
    """``length`` elements along ``dim`` from ``start``, as ``torch.narrow`` (a copy)."""
    dim = _axis("narrow", "dim", dim, self.ndim)
    n = self.shape[dim]
    start = checks.integer("narrow", "start", start)
    length = checks.integer("narrow", "length", length, 0)
    if not -n <= start <= n or start % max(n, 1) + length > n:
        raise bad_axis("narrow", "start", start,
                       f"a start with start + length ({length}) within {n}")
    start %= max(n, 1)
    return self[(slice(None),) * dim + (slice(start, start + length),)]


def _detach(self):
    """The same storage as a tensor with no history (requires_grad False), as PyTorch's
    ``detach()``: what the tape records beyond it does not flow back here. A view of a
    persistent tensor (a parameter) is persistent too: it outlives tapes as its storage
    does."""
    backend = device.active()
    view = backend.reshape(handle(backend, self), self.shape)
    return adopt(backend, Tensor(self.shape, self.dtype, persistent=self.persistent), view)


def _clone(self):
    """A copy in storage of its own whose gradient flows back to the tensor unchanged, as
    PyTorch's ``clone()``."""
    backend = device.active()
    copied = backend.empty(self.shape, self.dtype)
    backend.copy(copied, handle(backend, self))
    out = adopt(backend, Tensor(self.shape, self.dtype), copied)
    return tape.record(out, (self,), lambda g, needs: (g,), backend, None, None)


def _where(self, condition, other):
    """``dg.where(condition, t, other)``, as ``torch.Tensor.where``."""
    return where(condition, self, other)


def _unflatten(self, dim: int, sizes):
    """Axis ``dim`` split into ``sizes`` (one may be -1), as ``torch.unflatten``."""
    from .nn import Unflatten
    return Unflatten(dim, sizes)(self)


def _requires_grad_(self, requires_grad: bool = True):
    """Set whether this leaf takes a gradient; returns it, as PyTorch's."""
    flag = checks.flag("requires_grad_", "requires_grad", requires_grad)
    if self._node is not None:
        raise bad_value("requires_grad_", "self", "a computed tensor", "a leaf (a tensor "
                        "made by ag_tensor or a parameter): a computed one's flag follows "
                        "its inputs")
    if flag and not (self.dtype.kind == "f" or self.dtype.name == "bfloat16"):
        raise bad_value("requires_grad_", "requires_grad", True,
                        f"False for a {self.dtype} tensor (float tensors take gradients)")
    self.requires_grad = flag
    return self


def _detach_(self):
    """This tensor cut from its history in place (a leaf that takes no gradient), as
    PyTorch's ``detach_()``; returns it."""
    self._node = None
    self.requires_grad = False
    return self


def _like(fn: str, other) -> Tensor:
    if not isinstance(other, Tensor):
        raise bad_type(fn, "other", other, "a dualgrad Tensor")
    return other


def _shape_of(fn: str, other) -> tuple:
    return _like(fn, other).shape


def install(namespace: dict) -> None:
    """Give Tensor the methods above, ``namespace`` (the package's) supplying the functions;
    a name Tensor has already is kept."""
    extra = {"transpose": _transpose, "permute": _permute, "t": _t, "unbind": _unbind,
             "narrow": _narrow, "where": _where, "detach": _detach, "clone": _clone,
             "dim": lambda self: self.ndim,
             "contiguous": lambda self: self,
             "tolist": lambda self: self.numpy().tolist(),
             "view_as": lambda self, other: self.reshape(_shape_of("view_as", other)),
             "reshape_as": lambda self, other: self.reshape(_shape_of("reshape_as", other)),
             "expand_as": lambda self, other: namespace["expand"](
                 self, _shape_of("expand_as", other)),
             "type_as": lambda self, other: namespace["to"](
                 self, _like("type_as", other).dtype),
             "unflatten": _unflatten,
             "new_zeros": lambda self, *size, dtype=None, device=None, requires_grad=False:
                 namespace["zeros"](*size, dtype=self.dtype if dtype is None else dtype,
                                    device=device, requires_grad=requires_grad),
             "new_ones": lambda self, *size, dtype=None, device=None, requires_grad=False:
                 namespace["ones"](*size, dtype=self.dtype if dtype is None else dtype,
                                   device=device, requires_grad=requires_grad),
             "new_empty": lambda self, *size, dtype=None, device=None, requires_grad=False:
                 namespace["empty"](*size, dtype=self.dtype if dtype is None else dtype,
                                    device=device, requires_grad=requires_grad),
             "new_full": lambda self, size, fill_value, dtype=None, device=None,
             requires_grad=False: namespace["full"](
                 size, fill_value, dtype=self.dtype if dtype is None else dtype,
                 device=device, requires_grad=requires_grad),
             "new_tensor": lambda self, data, dtype=None, device=None, requires_grad=False:
                 namespace["tensor"](data, dtype=self.dtype if dtype is None else dtype,
                                     device=device, requires_grad=requires_grad),
             "is_floating_point": lambda self: self.dtype.kind == "f" or
             self.dtype.name == "bfloat16",
             "is_contiguous": lambda self: True,      # (every tensor here is: copies)
             "element_size": lambda self: self.dtype.itemsize,
             "nelement": lambda self: math.prod(self.shape),
             "requires_grad_": _requires_grad_,
             "detach_": _detach_}
    for name in _SAME_NAME:
        if not hasattr(Tensor, name):
            setattr(Tensor, name, _delegate(namespace[name]))
    for name, method in extra.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, method)
    Tensor.__abs__ = lambda self: namespace["abs"](self)               # abs(t)
    Tensor.__pos__ = lambda self: self                                 # +t, as torch.positive
    Tensor.__round__ = lambda self, ndigits=None: namespace["round"](  # round(t), a tensor
        self, ndigits or 0)
    Tensor.mT = property(lambda self: _transpose(self, -2, -1))
    Tensor.is_leaf = property(lambda self: self._node is None,
                              doc="Whether the tensor was not computed by a recorded op.")
    Tensor.grad_fn = property(lambda self: self._node, doc="The tape's record of the op that "
                              "computed the tensor, or None for a leaf (as PyTorch's, an "
                              "object to test against None).")
    Tensor.size = property(lambda self: _Size(self.shape), doc=_Size.__doc__)
