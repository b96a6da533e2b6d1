"""Residency: which storage a tensor holds, and how to write it without losing that.

A Tensor has ``_host`` (a host array or None) and ``ptr`` (a backend's device storage or
None). On a backend whose storage is host memory (cpu) the storage is ``_host`` and ``ptr``
stays None. On a device backend (gpu) ``ptr`` is the storage and ``_host`` at most a read
cache, dropped whenever the storage is written. This module is the one place that decides
(the backends deal in storage handles only):

- ``handle``: a tensor's storage on the active backend. A host value is moved there at
  first use (a persistent tensor into the persistent pool, where its value then lives) and
  stays; a tensor whose scope ended raises DeadTensorError (``dualgrad.api.scopes``).
- ``adopt``: make new storage a tensor's own (an op's output, a gradient, optimizer state).
- ``host_value``: the value as a host array, downloaded once and cached.
- ``rescue``: before a backend is given up, every live tensor's value comes to the host.

``store_weight`` is what optimizers and state-dict loading use: it writes into the existing
device buffer when there is a live one, so a resident weight stays resident.
``set_host_data`` puts a host value in place and drops the device pointer (the value moves
back to the device once, at its next use there).
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import ArgumentTypeError, DeadTensorError, ShapeError, bad_type
from . import capture, device, scopes
from .idset import WeakIdSet
from .tensor import Tensor, host_array

_lock = threading.Lock()
_resident: dict = {}              # backend -> WeakIdSet of tensors given its device storage


def handle(backend, t: Tensor):
    """``t``'s storage on ``backend`` (moved there at first use)."""
    scope = t._scope
    if scope is not None and not scope.alive:
        raise DeadTensorError(scope.dead_message(t))
    ptr = t.ptr
    if ptr is not None and backend.owns(ptr):
        if capture.steps_running:
            step = capture.local.step
            if step is not None:
                step.used(t)
        return ptr
    data = t._host
    if data is None:
        raise DeadTensorError(
            f"this {t.scope} tensor of shape {t.shape} has no value: its device memory was "
            "freed (the device was released, or the step that computed it was replayed "
            "again) before the value was read")
    if backend.host_storage:
        return data
    if not backend.supports(t.dtype):
        raise ArgumentTypeError(f"the {backend.name} backend holds float32 tensors only; this "
                                f"tensor is {t.dtype} (convert it, or use the cpu backend)")
    # Moves here once (rule 8): a step that moves a tensor is recorded at its next call.
    step = capture.local.step if capture.steps_running else None
    if step is not None:
        step.stop("a tensor moved to the device during it", once=True)
    h = backend.upload(data, t.persistent)
    t.ptr = h
    if t.persistent:
        t._host = None                        # the device copy is now the value
    (_resident.get(backend) or _track(backend)).add(t)
    return h


def adopt(backend, t: Tensor, h, kept: bool = False) -> Tensor:
    """Make ``h`` (new storage on ``backend``) the storage of ``t``; returns ``t``. A
    tensor that is neither persistent nor ``kept`` lives in the current scope; a kept one
    (a value from the host, a gradient of one) outlives it: where ``h`` is pass storage,
    it is moved out before that storage is freed (``keep_host_values``)."""
    if backend.host_storage:
        t._host, t.ptr = h, None
    else:
        t.ptr, t._host = h, None
        tracked = _resident.get(backend)
        if tracked is None:
            tracked = _track(backend)
        tracked.add(t)
        if capture.steps_running:
            step = capture.local.step
            if step is not None:
                step.adopted(t, h)
        if kept and not t.persistent:
            scopes.of(backend).keep(t)
    t._scope = None if t.persistent or kept else scopes.current(backend)
    return t


def keep_host_values(backend, lifetimes) -> None:
    """Before ``backend`` frees the calling thread's pass storage: every value from the
    host still alive there (and the gradients of such values: ``lifetimes.keep``) is copied
    into persistent storage, on the device. Such a value rarely outlives its tape (the graph
    that holds a batch is freed by backward), so this is usually nothing."""
    for t in lifetimes.take_kept():
        ptr = t.ptr
        if ptr is None or not backend.owns(ptr) or ptr.scope != "pass":
            continue
        step = capture.local.step if capture.steps_running else None
        if step is not None:             # (the copy must run now, not at each replay)
            step.stop("a value from the host outlived the tape it was made in", once=True)
        h = backend.empty(t.shape, t.dtype, persistent=True)
        backend.copy(h, ptr)
        t.ptr = h


def _track(backend):
    """The set of tensors given ``backend``'s device storage (made at first need)."""
    with _lock:
        return _resident.setdefault(backend, WeakIdSet())


def host_value(backend, t: Tensor):
    """``t``'s current value as a host array (downloaded and cached where it lives on a
    device); the caller must not modify it. A value read is kept: the tensor no longer
    ends with its scope."""
    data = t._host
    ptr = t.ptr
    if data is None or (t._scope is not None and not t._scope.alive) or \
            (ptr is not None and t._seen != ptr.writes):      # (written through a view)
        h = handle(backend, t)
        data = t._host if backend.host_storage else backend.download(h)
        t._host = data
        if ptr is not None:
            t._seen = ptr.writes
    t._scope = None
    return data


def rescue(backend) -> None:
    """Bring the value of every live tensor on ``backend``'s device to the host and drop
    its device pointer (before the backend is released)."""
    with _lock:
        tracked = _resident.pop(backend, None)
    for t in list(tracked or ()):
        ptr = t.ptr
        if ptr is None or not backend.owns(ptr):
            continue
        if t._host is None:
            t._host = backend.download(ptr)
        t.ptr = None


# -- the seed's helpers ------------------------------------------------------------------------
def _tensor(fn: str, t) -> Tensor:
    if not isinstance(t, Tensor):
        raise bad_type(fn, "t", t, "a Tensor")
    return t


def ptr_is_live(t) -> bool:
    """Whether ``t`` has a device buffer whose pool has not been reset or released."""
    t = _tensor("ptr_is_live", t)
    return t.ptr is not None and t.ptr.live


def tensor_scope(t) -> str:
    """``"persistent"`` for a tensor in the device's persistent pool, else ``"pass"``."""
    return _tensor("tensor_scope", t).scope


def _value(fn: str, t: Tensor, value):
    array = host_array(fn, "value", value, t.dtype)
    if array.shape != t.shape:
        raise ShapeError(f"{fn}: cannot change a tensor's shape: the tensor has shape "
                         f"{t.shape} and the value has shape {array.shape}")
    return array


def write_resident(t, value, fn: str = "write_resident") -> None:
    """Write new numbers into ``t``'s existing storage (the same device buffer on gpu) and
    drop its host cache. The shape cannot change. (``fn`` names the caller in errors.)"""
    t = _tensor(fn, t)
    array = _value(fn, t, value)
    backend = device.active()
    backend.write(handle(backend, t), array)
    t.written()


def store_weight(t, value) -> None:
    """Set ``t``'s value, keeping it resident when its device buffer is live, and writing
    into its host array where that is its storage: views of the storage (``detach()``,
    ``t.data``) see the value on the cpu as on a device."""
    t = _tensor("store_weight", t)
    if ptr_is_live(t):
        write_resident(t, value, "store_weight")
    elif t.ptr is None and (t._scope is None or t._scope.alive) and _writable_host_array(t):
        np.copyto(t._host, _value("store_weight", t, value))
    else:
        set_host_data(t, value, "store_weight")


def _writable_host_array(t) -> bool:
    """Whether ``t``'s host array can take a value in place."""
    h = t._host
    return isinstance(h, np.ndarray) and h.flags.writeable and h.shape == t.shape and \
        h.dtype == t.dtype


def set_host_data(t, value, fn: str = "set_host_data") -> None:
    """Give ``t`` a host value and drop its device pointer. (``fn`` names the caller in
    errors.)"""
    t = _tensor(fn, t)
    t._host = _value(fn, t, value).copy()
    t.ptr = None
    t._scope = None
