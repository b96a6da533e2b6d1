"""Tensor and Parameter: a shape, a dtype, storage on one backend, and autograd links.

Storage follows the residency rules (``residency.py``):

- ``_host`` is a host array or None; ``ptr`` a device buffer or None. On cpu ``ptr`` is None
  and ``_host`` is the storage. On gpu ``ptr`` is the storage and ``_host`` at most a read
  cache, dropped whenever the buffer is written. (``t.data`` is PyTorch's: the tensor's
  storage as a tensor without history.)
- ``scope`` is ``"persistent"`` for a tensor in the device's persistent pool, else ``"pass"``
  (the pools each tape or evaluation frees; on cpu it means "no pool"). ``persistent`` says
  that a tensor's value outlives every tape (parameters, optimizer state, values from the
  host): on a device it goes in the persistent pool.
"""
from __future__ import annotations

import copy
import math

import ml_dtypes
import numpy as np

from ..errors import (ArgumentTypeError, DeadTensorError, InvalidValueError, bad_shape,
                      bad_type, bad_value)
from ..shapes import MAX_RANK
from . import checks, device, device_names

DEFAULT_DTYPE = np.dtype(np.float32)
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
BOOL, INT32 = np.dtype(np.bool_), np.dtype(np.int32)
# Integer tensors are int32 on both backends (PyTorch's default is int64): the device's
# kernels index in 32 bits, and no tensor has 2^31 elements.
FLOAT16, BFLOAT16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
# The ops compute on 16-bit floats in float32 and round their results (low_precision.py).
LOW_PRECISION = (FLOAT16, BFLOAT16)
_DTYPES = _FLOAT_DTYPES + (INT32, BOOL) + LOW_PRECISION


def is_float(dtype) -> bool:
    """float32 or float64: the types the kernels compute in."""
    return dtype in _FLOAT_DTYPES


def is_floating(dtype) -> bool:
    """Any float type, the 16-bit ones too: the types that take gradients."""
    return dtype in _FLOAT_DTYPES or dtype in LOW_PRECISION


class Tensor:
    """An n-dimensional float array that autograd can track. Make one with
    ``dg.ag_tensor(array)``; ops return new tensors."""

    __slots__ = ("shape", "dtype", "_host", "ptr", "requires_grad", "persistent", "_grad",
                 "_node", "_scope", "_hooks", "_seen", "__weakref__")
    __array_ufunc__ = None       # NumPy defers to our operators: ndarray + Tensor -> Tensor

    def __init__(self, shape: tuple, dtype, requires_grad: bool = False,
                 persistent: bool = False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self._host = None
        self.ptr = None
        self.requires_grad = requires_grad
        # Whether the value outlives every tape (parameters, their gradients, optimizer
        # state, values from the host): on a device it lives in the persistent pool.
        self.persistent = persistent
        self._grad = None
        self._node = None
        self._scope = None        # the scope a computed tensor lives in (scopes.py)
        self._hooks = None        # post-accumulate-grad hooks of a leaf (tape.py)
        self._seen = 0            # the device storage's write count when ``_host`` was read

    # -- what it is --------------------------------------------------------------------------
    @property
    def scope(self) -> str:
        return self.ptr.scope if self.ptr is not None else "pass"

    @property
    def device(self) -> device_names.device:
        """Where the tensor is used: the active backend's name ("cpu" or "gpu") as a
        ``dg.device``, a ``str`` with ``.type`` and ``.index`` as PyTorch's, which the
        factories' ``device=`` and ``t.to()`` take, as code written for PyTorch passes
        ``x.device`` on."""
        return device_names.named(device.active().name)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def numel(self) -> int:
        """The number of elements (``size``), as PyTorch names it."""
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise ArgumentTypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        """The slices along the first axis, as PyTorch's (a 0-d tensor is not iterable)."""
        if not self.shape:
            raise ArgumentTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        """Its values (NumPy's summary past a thousand elements: reading them waits for the
        device), then shape, dtype and where the value lives."""
        kind = type(self).__name__
        try:
            text = np.array2string(residency.host_value(device.active(), self),
                                   separator=", ", prefix=kind + "(", threshold=1000)
        except DeadTensorError:
            text = "<freed>"
        where = "gpu" if self.ptr is not None else "cpu"     # (where the value lives)
        grad = ", requires_grad=True" if self.requires_grad else ""
        return (f"{kind}({text}, shape={self.shape}, dtype={self.dtype.name}, "
                f"device={where}{grad})")

    def __bool__(self) -> bool:
        if self.size != 1:
            raise bad_shape("bool", "self", self.shape, "a tensor with exactly one element "
                            "(the truth of several values is ambiguous, as in NumPy and "
                            "PyTorch: reduce them first)")
        return bool(residency.host_value(device.active(), self).reshape(-1)[0] != 0)

    # -- copies --------------------------------------------------------------------------------
    def __deepcopy__(self, memo) -> "Tensor":
        """A tensor of the same class, value (copied where it lives, on the device where it
        is there), requires_grad and gradient, with storage of its own; no history."""
        backend = device.active()
        h = backend.empty(self.shape, self.dtype, self.persistent)
        backend.copy(h, residency.handle(backend, self))
        twin = type(self)(self.shape, self.dtype, self.requires_grad, self.persistent)
        residency.adopt(backend, twin, h, kept=self._scope is None)
        memo[id(self)] = twin
        if self._grad is not None:
            twin._grad = copy.deepcopy(self._grad, memo)
        return twin

    def __reduce__(self):
        """Pickled as its value (a NumPy array), class and requires_grad, never its device
        storage; unpickled onto the backend active then."""
        return _unpickle, (type(self), self.numpy(), self.requires_grad)

    # -- reading -----------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A host copy of the value (downloads from the device if needed)."""
        value = residency.host_value(device.active(), self)
        return value.copy()

    def __array__(self, dtype=None, copy=None):
        value = self.numpy()
        return value if dtype is None else value.astype(dtype, copy=False)

    def item(self):
        """The value of a one-element tensor as a Python float (int, bool for those
        dtypes)."""
        if self.size != 1:
            raise bad_shape("item", "self", self.shape, "a tensor with exactly one element")
        value = residency.host_value(device.active(), self).reshape(-1)[0]
        if self.dtype == BOOL:
            return bool(value)
        return int(value) if self.dtype == INT32 else float(value)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def written(self) -> None:
        """Note an in-place write to the storage: the host cache of a device tensor, and of
        every other view of its storage (``detach()``, ``reshape``), is stale."""
        if self.ptr is not None:
            self._host = None
            self.ptr.wrote()

    # -- gradient ----------------------------------------------------------------------------
    @property
    def grad(self):
        """The accumulated gradient (a Tensor) or None. Assigning a NumPy array or a Tensor
        of the same shape sets it; assigning None clears it."""
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        self._grad = None if value is None else _grad_from(self, value)

    def retain_grad(self) -> None:
        """Keep this computed tensor's gradient in ``.grad`` at the next ``backward()``
        through it, as PyTorch's (a leaf keeps its own anyway)."""
        from . import tape
        if self._node is not None:
            tape.watch(self).retain = True

    def register_hook(self, hook) -> "GradHookHandle":
        """Call ``hook(grad)`` with this tensor's gradient during ``backward()``, as
        PyTorch's: a tensor it returns replaces the gradient (what flows on, and what a
        leaf accumulates). Returns a handle whose ``remove()`` unregisters it."""
        from . import tape
        if not callable(hook):
            raise bad_type("register_hook", "hook", hook, "a callable")
        if self._node is None and not self.requires_grad:
            raise InvalidValueError("register_hook: the tensor does not require grad; no "
                                    "gradient will reach it")
        watch = tape.watch(self)
        watch.hooks.append(hook)
        return GradHookHandle(watch, hook)

    def register_post_accumulate_grad_hook(self, hook) -> "HookHandle":
        """Call ``hook(tensor)`` during each ``backward()`` once this leaf's gradient for
        that pass is complete in ``.grad`` (as PyTorch's hook of that name: what data
        parallelism starts its all-reduce from). Returns a handle whose ``remove()``
        unregisters it."""
        if not callable(hook):
            raise bad_type("register_post_accumulate_grad_hook", "hook", hook, "a callable")
        if self._node is not None:
            raise InvalidValueError("register_post_accumulate_grad_hook: the tensor is not "
                                    "a leaf (it was computed by an op); register the hook "
                                    "on a parameter or a tensor made by ag_tensor")
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(hook)
        return HookHandle(self, hook)

    def backward(self, grad=None, retain_graph: bool = False) -> None:
        """Backpropagate from this tensor (see ``dg.backward``)."""
        from .tape import backward
        backward(self, grad, retain_graph)


class GradHookHandle:
    """What ``register_hook`` returns: ``remove()`` unregisters the hook."""

    __slots__ = ("_watch", "_hook")

    def __init__(self, watch, hook):
        self._watch, self._hook = watch, hook

    def remove(self) -> None:
        if self._hook in self._watch.hooks:
            self._watch.hooks.remove(self._hook)


class HookHandle:
    """What ``register_post_accumulate_grad_hook`` returns: ``remove()`` unregisters."""

    __slots__ = ("_tensor", "_hook")
    registered = 0            # hooks registered and not removed, in all tensors: a
                              # backward() looks for hooked leaves only when there are some

    def __init__(self, tensor: Tensor, hook):
        self._tensor, self._hook = tensor, hook
        HookHandle.registered += 1

    def remove(self) -> None:
        hooks = self._tensor._hooks
        if hooks is not None and self._hook in hooks:
            hooks.remove(self._hook)
            HookHandle.registered -= 1
            if not hooks:
                self._tensor._hooks = None


class Parameter(Tensor):
    """A trainable tensor: always requires grad; on gpu it lives in the persistent pool."""

    __slots__ = ()


def _unpickle(cls, value: np.ndarray, requires_grad: bool) -> Tensor:
    if cls is Parameter:
        return ag_param(value, dtype=value.dtype)
    return ag_tensor(value, requires_grad=requires_grad, dtype=value.dtype)


def _grad_from(t: Tensor, value) -> Tensor:
    """A gradient tensor for ``t`` from a user value, in ``t``'s pool."""
    if isinstance(value, Tensor):
        array = value.numpy()
    else:
        array = host_array("grad", "grad", value, t.dtype)
    if array.shape != t.shape:
        raise bad_shape("grad", "grad", array.shape, f"the tensor's shape {t.shape}")
    backend = device.active()
    g = Tensor(t.shape, t.dtype, persistent=t.persistent)
    return residency.adopt(backend, g, backend.upload(array.astype(t.dtype, copy=False),
                                                      t.persistent), kept=t._scope is None)


def dtype_names() -> dict:
    """PyTorch's names of the dtypes, as the package exports them (``dg.long`` ...)."""
    return {"float64": np.dtype(np.float64), "double": np.dtype(np.float64),
            "half": FLOAT16, "float": DEFAULT_DTYPE, "int32": INT32, "int64": INT32,
            "long": INT32, "int": INT32, "bool": BOOL}


def resolve_dtype(fn: str, dtype, floats_only: bool = False) -> np.dtype:
    """``dtype`` (None: float32) checked: float32, float64, int32, bool, float16 or
    bfloat16 (``floats_only``: the four float types)."""
    if dtype is None:
        return DEFAULT_DTYPE
    wanted = "float32, float64, float16 or bfloat16" if floats_only else \
        "float32, float64, int32, bool, float16 or bfloat16"
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise bad_type(fn, "dtype", dtype, wanted) from None
    if resolved.kind in "iu" and not floats_only:
        resolved = INT32        # (PyTorch's int64 indices, its long: int32 here; values
                                # past int32's range are refused where they are made)
    if resolved not in (_FLOAT_DTYPES + LOW_PRECISION if floats_only else _DTYPES):
        hint = " (integer tensors are int32)" if resolved.kind in "iu" else ""
        raise ArgumentTypeError(f"{fn}: argument 'dtype' is {resolved}; expected "
                                f"{wanted}{hint}")
    return resolved


def host_array(fn: str, arg: str, value, dtype=None) -> np.ndarray:
    """A C-contiguous float array from array-like input, converted to ``dtype`` (float32 by
    default: float64 and integer input are converted). Rejects non-numeric input."""
    dtype = DEFAULT_DTYPE if dtype is None else dtype
    if isinstance(value, Tensor):
        return value.numpy().astype(dtype, copy=False)
    if isinstance(value, (str, bytes)) or value is None:
        raise bad_type(fn, arg, value, "a NumPy array, a nested list of numbers or a number")
    if isinstance(value, np.ndarray) and value.dtype == BFLOAT16:
        value = value.astype(DEFAULT_DTYPE)          # (exact; NumPy knows no bfloat16 kind)
    array = checks.array(fn, arg, value, "biuf",
                         "real numbers (bool, integer or floating point)")
    if dtype in LOW_PRECISION:        # rounded once, from float32 (as .to() rounds)
        with np.errstate(over="ignore"):              # (inf past the type's range)
            return np.asarray(array, dtype=DEFAULT_DTYPE, order="C").astype(dtype)
    if dtype == INT32 and array.dtype.kind in "iuf" and array.size and (
            not np.isfinite(array).all() or array.min() <= -2 ** 31 - 1 or
            array.max() >= 2 ** 31):      # (floats truncate toward zero, as PyTorch's)
        raise bad_value(fn, arg, f"values in [{array.min()}, {array.max()}]",
                        "finite numbers within int32's range")
    return np.asarray(array, dtype=dtype, order="C")     # keeps 0-d arrays 0-d


def ag_tensor(array, requires_grad: bool = False, dtype=None) -> Tensor:
    """A tensor holding a copy of ``array`` (NumPy array, nested list or number).

    Input is converted to float32 unless another ``dtype`` is asked for: "float64" (the cpu
    backend only), "int32" or bool (integer and boolean tensors take no gradient),
    "float16" or "bfloat16" (rounded to nearest even from float32; the ops compute on
    such a tensor in float32 and round their results to it). The
    tensor is a leaf; with ``requires_grad=True``
    autograd accumulates its gradient in ``.grad``. Its value, and its gradient's, outlive
    every tape on both backends (on gpu it is uploaded into the current pass pool, and
    copied into the persistent pool, on the device, if it is still alive when that pool
    is freed).
    """
    requires_grad = checks.flag("ag_tensor", "requires_grad", requires_grad)
    dtype = resolve_dtype("ag_tensor", dtype)
    if requires_grad and not is_floating(dtype):
        raise bad_value("ag_tensor", "requires_grad", True,
                        f"False for a {dtype} tensor (float tensors take gradients)")
    value = host_array("ag_tensor", "array", array, dtype)
    _check_rank("ag_tensor", value)
    backend = device.active()
    _check_dtype(backend, "ag_tensor", dtype)
    t = Tensor(value.shape, dtype, requires_grad)
    return residency.adopt(backend, t, backend.upload(value), kept=True)


def _persistent(fn: str, arg: str, array, dtype, cls) -> Tensor:
    """A ``cls`` tensor (a Parameter takes gradients) holding a copy of ``array`` in the
    persistent pool: on gpu it is uploaded once and its value lives only on the device."""
    value = host_array(fn, arg, array, dtype)
    _check_rank(fn, value)
    backend = device.active()
    _check_dtype(backend, fn, dtype)
    t = cls(value.shape, dtype, cls is Parameter, persistent=True)
    return residency.adopt(backend, t, backend.upload(value, persistent=True))


def ag_param(array, dtype=None) -> Parameter:
    """A trainable Parameter holding a copy of ``array`` (float32 unless ``dtype`` says:
    float64, or float16 or bfloat16, which the optimizers do not update: for a model run
    in 16 bits). On gpu it is uploaded once into the persistent pool and its value lives
    only on the device."""
    dtype = resolve_dtype("ag_param", dtype, floats_only=True)
    return _persistent("ag_param", "array", array, dtype, Parameter)


def ag_buffer(array, dtype=None) -> Tensor:
    """A persistent tensor that takes no gradient (a module's buffer: running statistics),
    holding a copy of ``array`` (float32, or int32 for integers, unless ``dtype`` says)."""
    if dtype is None:
        dtype = INT32 if np.asarray(array).dtype.kind in "iu" else None
    dtype = resolve_dtype("register_buffer", dtype)
    return _persistent("register_buffer", "value", array, dtype, Tensor)


def ag_data(t) -> np.ndarray:
    """A tensor's value as a NumPy array (a copy); arrays and numbers pass through as
    float32 arrays."""
    if isinstance(t, Tensor):
        return t.numpy()
    return host_array("ag_data", "t", t)


def _check_rank(fn: str, value: np.ndarray) -> None:
    if value.ndim > MAX_RANK:
        raise bad_shape(fn, "array", value.shape, f"at most {MAX_RANK} dimensions")


def _check_dtype(backend, fn: str, dtype) -> None:
    if not backend.supports(dtype):
        raise ArgumentTypeError(f"{fn}: dtype {dtype} is not supported by the "
                                f"{backend.name} backend; use float32")



from . import residency  # noqa: E402  (it uses Tensor)
