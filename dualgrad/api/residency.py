"""Residency helpers: where a tensor's value lives and how to write it without losing that.

``store_weight`` is what optimizers and state-dict loading use: it writes into the existing
device buffer when there is a live one, so a resident weight stays resident.
``set_host_data`` puts a host value in place and drops the device pointer (the value moves
back to the device once, at its next use there).
"""
from __future__ import annotations

from . import device
from .errors import ShapeError, bad_type
from .tensor import Tensor, host_array


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
    backend.write(backend.handle(t), array)
    t.written()


def store_weight(t, value) -> None:
    """Set ``t``'s value, keeping it resident when its device buffer is live."""
    t = _tensor("store_weight", t)
    if ptr_is_live(t):
        write_resident(t, value, "store_weight")
    else:
        set_host_data(t, value, "store_weight")


def set_host_data(t, value, fn: str = "set_host_data") -> None:
    """Give ``t`` a host value and drop its device pointer. (``fn`` names the caller in
    errors.)"""
    t = _tensor(fn, t)
    t.data = _value(fn, t, value).copy()
    t.ptr = None
