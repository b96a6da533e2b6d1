"""Mixed precision: ``with dg.autocast(dtype="bfloat16"):``.

Inside the block, the products (``matmul``, ``linear`` and what is built on them: the
convolutions, attention) take their float32 inputs rounded to ``dtype`` (bfloat16 or
float16, to nearest even) and accumulate in float32; in their backward pass the incoming
gradient is rounded the same way before it meets those inputs. Everything else computes in
float32 as outside the block: elementwise ops, reductions, softmax, normalisation, losses.
Parameters and optimizer state stay float32 (the master weights), and gradients reach them
in float32.

The products round in the backends' ``matmul(..., low=)`` (the cpu its operands, a device
with bfloat16 tensor cores as it splits them, others by conversion kernels), attention's
inputs by conversions of their own: the same bits on both backends, so the cpu reference
rounds exactly where the device rounds and the differential suite keeps its meaning. A deliberate difference from PyTorch's autocast:
a product's result stays float32 (PyTorch's is bfloat16 or float16, so the elementwise ops
after it round again); it is the result of low-precision inputs with float32 accumulation.
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import bad_value
from . import checks
from .tensor import BFLOAT16, FLOAT16

_local = threading.local()
_TYPES = {"bfloat16": BFLOAT16, "float16": FLOAT16}


def active():
    """The 16-bit type products round their inputs to in this thread now, or None."""
    return getattr(_local, "dtype", None)


class autocast:  # noqa: N801 - used as a function, as torch.autocast is
    """Within the block (or the decorated function), products take their inputs in
    ``dtype`` ("bfloat16", the default, or "float16") and accumulate in float32 (see the
    module's docstring). ``enabled=False`` turns it off inside an enclosing block. Blocks
    nest; each thread has its own."""

    def __init__(self, dtype="bfloat16", enabled: bool = True):
        enabled = checks.flag("autocast", "enabled", enabled)
        try:
            resolved = np.dtype(dtype)
        except TypeError:
            resolved = None
        if resolved not in _TYPES.values():
            raise bad_value("autocast", "dtype", dtype, "'bfloat16' or 'float16'")
        self.dtype, self.enabled = resolved, enabled
        self._before = []

    def __enter__(self) -> "autocast":
        self._before.append(active())
        _local.dtype = self.dtype if self.enabled else None
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        _local.dtype = self._before.pop()
        return False

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)
        wrapped.__name__, wrapped.__doc__ = fn.__name__, fn.__doc__
        return wrapped


class suspended:  # noqa: N801 - used as a function
    """No rounding within the block (a product's own parts, once its inputs are rounded)."""

    def __enter__(self):
        self._before = active()
        _local.dtype = None

    def __exit__(self, kind, exc, tb) -> bool:
        _local.dtype = self._before
        return False


def is_autocast_enabled() -> bool:
    """Whether products round their inputs in this thread now."""
    return active() is not None
