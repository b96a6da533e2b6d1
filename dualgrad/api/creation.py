"""Tensors made from a size or a pattern, on the active backend, as PyTorch's factories.

Each builds its values on the host and uploads them once, as ``ag_tensor`` does, so both
backends hold the same numbers bit for bit; ``rand`` and ``randn`` draw from dualgrad's
generator (``manual_seed`` repeats them). Tensors are float32 unless ``dtype="float64"``
(cpu backend only); ``arange`` of ints gives int32, dualgrad's integer type, where
PyTorch's gives int64.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidValueError, bad_type
from ..shapes import MAX_RANK
from . import checks, random
from .device import is_placement
from .checks import is_number
from .tensor import Tensor, ag_tensor, resolve_dtype


def _size(fn: str, size: tuple) -> tuple:
    """``f(2, 3)`` or ``f((2, 3))``: a shape of non-negative ints, at most MAX_RANK long."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if len(size) > MAX_RANK:
        raise InvalidValueError(f"{fn}: argument 'size' has {len(size)} dimensions; at most "
                                f"{MAX_RANK}")
    return tuple(checks.integer(fn, "size", n, 0) for n in size)


def _placed(fn: str, where) -> None:
    """``device=`` as PyTorch's factories take it: None or a device name (``x.device``),
    which changes nothing (tensors are made on the active backend)."""
    if where is not None and not is_placement(fn, where):
        raise bad_type(fn, "device", where, "None or a device name ('cpu', 'gpu', 'cuda')")


def _make(fn: str, value: np.ndarray, dtype, requires_grad: bool, where=None) -> Tensor:
    _placed(fn, where)
    if checks.flag(fn, "requires_grad", requires_grad) and value.dtype.kind in "biu":
        raise InvalidValueError(f"{fn}: argument 'requires_grad' is True; expected False for "
                                f"a {value.dtype} tensor (float tensors take gradients)")
    return ag_tensor(value, requires_grad=requires_grad, dtype=dtype)


def _number(fn: str, name: str, value) -> float:
    if not is_number(value):
        raise bad_type(fn, name, value, "a number")
    return float(value)


def _filled(fn: str, shape: tuple, fill_value, dtype, requires_grad: bool, where) -> Tensor:
    """``fill_value`` in ``shape``: what full, zeros, ones and their ``_like`` forms make,
    their errors named ``fn``."""
    value = _number(fn, "fill_value", fill_value)
    kind = resolve_dtype(fn, dtype)
    if kind == np.int32:
        value = checks.int32_value(fn, "fill_value", fill_value)
    return _make(fn, np.full(shape, value, kind), dtype, requires_grad, where)


def zeros(*size, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A tensor of zeros: ``zeros(2, 3)`` or ``zeros((2, 3))``."""
    return _filled("zeros", _size("zeros", size), 0, dtype, requires_grad, device)


def ones(*size, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A tensor of ones: ``ones(2, 3)`` or ``ones((2, 3))``."""
    return _filled("ones", _size("ones", size), 1, dtype, requires_grad, device)


def full(size, fill_value, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (inf and NaN allowed)."""
    return _filled("full", _size("full", (size,)), fill_value, dtype, requires_grad, device)


def _like(fn: str, t) -> Tensor:
    if not isinstance(t, Tensor):
        raise bad_type(fn, "input", t, "a dualgrad Tensor")
    return t


def _shaped_like(fn: str, factory, input, dtype, requires_grad: bool,  # noqa: A002
                 where=None) -> Tensor:
    """``factory`` of ``input``'s shape and (unless ``dtype`` is given) dtype."""
    t = _like(fn, input)
    return factory(t.shape, dtype=t.dtype if dtype is None else dtype,
                   requires_grad=requires_grad, device=where)


def _filled_like(fn: str, input, fill_value, dtype, requires_grad: bool,  # noqa: A002
                 where) -> Tensor:
    t = _like(fn, input)
    return _filled(fn, t.shape, fill_value, t.dtype if dtype is None else dtype,
                   requires_grad, where)


def zeros_like(input, dtype=None, requires_grad: bool = False, device=None) -> Tensor:  # noqa: A002
    """Zeros of ``input``'s shape (and dtype, unless ``dtype`` is given)."""
    return _filled_like("zeros_like", input, 0, dtype, requires_grad, device)


def ones_like(input, dtype=None, requires_grad: bool = False, device=None) -> Tensor:  # noqa: A002
    """Ones of ``input``'s shape (and dtype, unless ``dtype`` is given)."""
    return _filled_like("ones_like", input, 1, dtype, requires_grad, device)


def full_like(input, fill_value, dtype=None, requires_grad: bool = False,
              device=None) -> Tensor:  # noqa: A002
    """``fill_value`` in ``input``'s shape (and dtype, unless ``dtype`` is given)."""
    return _filled_like("full_like", input, fill_value, dtype, requires_grad, device)


def arange(start, end=None, step=1, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """start, start + step, ... below ``end`` (``arange(n)``: 0 .. n-1), as torch.arange:
    int32 where start, end and step are all ints and no dtype is given (PyTorch's int64;
    exact), else float32 (or ``dtype``), the values computed in float64, then rounded."""
    if end is None:
        start, end = 0, start
    lo = _number("arange", "start", start)
    hi = _number("arange", "end", end)
    d = _number("arange", "step", step)
    for name, v in (("start", lo), ("end", hi), ("step", d)):
        if not math.isfinite(v):
            raise InvalidValueError(f"arange: argument '{name}' is {v}; expected a finite "
                                    "number")
    if d == 0 or (hi - lo) * d < 0:
        raise InvalidValueError(f"arange: argument 'step' ({d}) must be nonzero and point "
                                f"from start ({lo}) toward end ({hi})")
    if dtype is None and all(_is_int(v) for v in (start, end, step)):
        for name, v in (("start", start), ("end", end)):
            checks.int32_value("arange", name, v)
        value = np.arange(int(start), int(end), int(step), dtype=np.int64)
        return _make("arange", value.astype(np.int32), "int32", requires_grad, device)
    count = max(0, math.ceil((hi - lo) / d))
    value = lo + d * np.arange(count, dtype=np.float64)
    return _make("arange", value.astype(resolve_dtype("arange", dtype)),
                 dtype, requires_grad, device)


def _is_int(value) -> bool:
    """A Python or NumPy integer (not a bool): what makes torch.arange's result integers."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def linspace(start, end, steps: int, dtype=None, requires_grad: bool = False,
             device=None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, as
    torch.linspace (computed in float64, then rounded to the dtype)."""
    lo = _number("linspace", "start", start)
    hi = _number("linspace", "end", end)
    n = checks.integer("linspace", "steps", steps, 0)
    value = np.linspace(lo, hi, n, dtype=np.float64)
    return _make("linspace", value.astype(resolve_dtype("linspace", dtype)), dtype,
                 requires_grad, device)


def eye(n: int, m: int | None = None, dtype=None, requires_grad: bool = False,
        device=None) -> Tensor:
    """An n x m (default n x n) matrix with ones on the diagonal."""
    rows = checks.integer("eye", "n", n, 0)
    cols = rows if m is None else checks.integer("eye", "m", m, 0)
    return _make("eye", np.eye(rows, cols, dtype=resolve_dtype("eye", dtype)), dtype,
                 requires_grad, device)


def rand(*size, generator=None, dtype=None, requires_grad: bool = False,
         device=None) -> Tensor:
    """Uniform values in [0, 1), drawn from dualgrad's generator (``manual_seed``) or
    ``generator``, a ``dg.Generator``."""
    shape = _size("rand", size)
    draws = random.source("rand", generator)
    value = draws.random(shape, dtype=resolve_dtype("rand", dtype, True))
    return _make("rand", value, dtype, requires_grad, device)


def randn(*size, generator=None, dtype=None, requires_grad: bool = False,
          device=None) -> Tensor:
    """Standard normal values, drawn from dualgrad's generator (``manual_seed``) or
    ``generator``, a ``dg.Generator``."""
    shape = _size("randn", size)
    draws = random.source("randn", generator)
    value = draws.standard_normal(shape, dtype=resolve_dtype("randn", dtype))
    return _make("randn", value, dtype, requires_grad, device)


def rand_like(input, dtype=None, requires_grad: bool = False, device=None) -> Tensor:  # noqa: A002
    """``rand`` of ``input``'s shape (and float dtype, unless ``dtype`` is given)."""
    return _shaped_like("rand_like", rand, input, dtype, requires_grad, device)


def randn_like(input, dtype=None, requires_grad: bool = False, device=None) -> Tensor:  # noqa: A002
    """``randn`` of ``input``'s shape (and float dtype, unless ``dtype`` is given)."""
    return _shaped_like("randn_like", randn, input, dtype, requires_grad, device)


def empty(*size, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A tensor of ``size`` for values written later, as torch.empty: zeros here (never
    another tensor's leftover values)."""
    return zeros(*size, dtype=dtype, requires_grad=requires_grad, device=device)


def empty_like(input, dtype=None, requires_grad: bool = False, device=None) -> Tensor:  # noqa: A002
    """``empty`` of ``input``'s shape and dtype: zeros."""
    return zeros_like(input, dtype=dtype, requires_grad=requires_grad, device=device)


def randint(low, high=None, size=None, *, generator=None, dtype=None,
            requires_grad: bool = False, device=None) -> Tensor:
    """Integers drawn uniformly from [low, high) (``randint(high, size)``: from 0), of
    ``size``, from dualgrad's generator (or ``generator``): int32 tensors (PyTorch's are
    int64) unless ``dtype`` asks for a float type."""
    if size is None:          # randint(high, size)
        low, high, size = 0, low, high
    if size is None:
        raise InvalidValueError("randint: argument 'size' is missing; expected "
                                "randint(high, size) or randint(low, high, size)")
    lo = checks.integer("randint", "low", low)
    hi = checks.integer("randint", "high", high)
    if hi <= lo:
        raise InvalidValueError(f"randint: argument 'high' ({hi}) must be above low ({lo})")
    shape = _size("randint", (size,))
    dtype = "int32" if dtype is None else dtype
    kind = resolve_dtype("randint", dtype)
    if kind == np.int32 and (lo < -2 ** 31 or hi > 2 ** 31):
        raise InvalidValueError(f"randint: the range [{lo}, {hi}) does not fit int32 "
                                "tensors")
    value = random.source("randint", generator).integers(lo, hi, shape, dtype=np.int64)
    return _make("randint", value.astype(kind), dtype, requires_grad, device)


def randperm(n: int, *, generator=None, dtype=None, requires_grad: bool = False,
             device=None) -> Tensor:
    """A random permutation of 0 .. n-1 from dualgrad's generator (or ``generator``):
    int32 (PyTorch's int64) unless ``dtype`` asks for a float type."""
    n = checks.integer("randperm", "n", n, 0, 2 ** 31)
    dtype = "int32" if dtype is None else dtype
    value = random.source("randperm", generator).permutation(n)
    value = value.astype(resolve_dtype("randperm", dtype))
    return _make("randperm", value, dtype, requires_grad, device)


def tensor(data, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A tensor holding a copy of ``data``, its dtype inferred as torch.tensor infers it:
    floats give float32, Python and NumPy integers int32 (PyTorch's int64; values must fit),
    booleans bool, a 16-bit float array its type; ``dtype`` overrides. (``ag_tensor``
    makes float32 of anything unless told.) A tensor given is copied, with no history."""
    _placed("tensor", device)
    if isinstance(data, Tensor):
        data = data.numpy()
    if dtype is None:
        dtype = _inferred(data)
    return ag_tensor(data, requires_grad=requires_grad, dtype=dtype)


def _inferred(data):
    """torch.tensor's dtype for ``data``, in dualgrad's types."""
    try:
        kind = np.asarray(data).dtype
    except (ValueError, TypeError):
        return None                     # (ag_tensor names what is wrong with it)
    if kind == np.bool_:
        return bool
    if kind.kind in "iu":
        return "int32"
    if kind.kind == "f" and kind.itemsize == 2 or str(kind) == "bfloat16":
        return kind
    return None


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` itself where it is a tensor of ``dtype`` (or dtype None), else
    ``tensor(data, dtype)``: a copy (PyTorch shares a NumPy array's memory; dualgrad's
    tensors live in the backend's memory)."""
    _placed("as_tensor", device)
    if isinstance(data, Tensor):
        if dtype is None or resolve_dtype("as_tensor", dtype) == data.dtype:
            return data
        from .logic import to
        return to(data, dtype)
    return tensor(data, dtype)


def from_numpy(ndarray) -> Tensor:
    """A tensor holding a copy of the NumPy array ``ndarray`` (PyTorch's shares its memory),
    of its dtype as ``tensor`` infers it (float64 on the cpu backend only)."""
    if not isinstance(ndarray, np.ndarray):
        raise bad_type("from_numpy", "ndarray", ndarray, "a NumPy array")
    dtype = _inferred(ndarray)
    if dtype is None and ndarray.dtype == np.float64:
        dtype = "float64"
    return ag_tensor(ndarray, dtype=dtype)


__all__ = ["zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange",
           "linspace", "eye", "rand", "randn", "rand_like", "randn_like", "empty", "empty_like",
           "randint", "randperm", "tensor", "as_tensor", "from_numpy"]
