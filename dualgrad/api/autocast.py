"""Mixed precision: ``with dg.autocast(dtype="bfloat16"):`` (or PyTorch's
``with dg.autocast("cuda", dtype=dg.bfloat16):``).

Inside the block, the products (``matmul``, ``linear`` and what is built on them: the
convolutions, attention) are made in ``dtype`` (bfloat16 or float16), as PyTorch's
autocast makes them: float32 inputs rounded to it (to nearest even), 16-bit ones as they
are, float32 accumulation, and the result rounded to it once (``ops.product_type``). So
the activations after a product are 16-bit; the ops on them compute in float32 and round
(low_precision.py), but PyTorch's float32 ops (FLOAT32_OPS below: exp, sum, softmax, layer
norm, the losses, ...) give float32. Parameters and optimizer state stay float32 (the
master weights); a float32 input's gradient is float32, not rounded (PyTorch's are,
through its casts: a deliberate difference that leaves a rounding out).

The products round in the backends' ``matmul(..., low=, result=)`` (the cpu by its
conversions; a device's kernels as they load or split their operands and as they store
their results) and attention's kernels as they store: the same bits on both backends, so
the cpu reference rounds exactly where the device rounds and the differential suite keeps
its meaning.
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import bad_value
from . import checks
from .tensor import BFLOAT16, FLOAT16


class _State(threading.local):
    """This thread's autocast dtype (None outside autocast): a class default, so reading it
    misses no lookup (every op reads it)."""
    dtype = None


_local = _State()
_TYPES = {"bfloat16": BFLOAT16, "float16": FLOAT16}

# PyTorch's autocast float32 ops that dualgrad has (kernel ops by their kernel's name: x **
# 2 is pow_scalar, 2 / x rdiv_scalar): under autocast, given 16-bit tensors, they compute in
# float32 and their result stays float32 (PyTorch casts their inputs to float32). The rest
# give a 16-bit result where all their float tensors are of one 16-bit type.
FLOAT32_OPS = frozenset({
    "exp", "expm1", "log", "log10", "log1p", "log2", "reciprocal", "rsqrt", "sinh", "cosh",
    "tan", "acos", "asin", "softplus", "pow", "pow_scalar", "rpow_scalar", "rdiv_scalar",
    "sum", "prod", "cumsum", "cumprod", "norm", "logsumexp", "softmax", "log_softmax", "layer_norm",
    "group_norm", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "softmax_cross_entropy",
    "kl_div", "cosine_similarity"})


def active():
    """The 16-bit type products round their inputs to in this thread now, or None."""
    return _local.dtype


# Device types PyTorch code names (``torch.autocast("cuda")``): the products of the active
# backend round either way. Where no dtype is given, PyTorch's default for that device.
_DEVICE_TYPES = {"cuda": FLOAT16, "gpu": FLOAT16, "cpu": BFLOAT16}


def _resolve(dtype):
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        return None
    return resolved if resolved in _TYPES.values() else None


class autocast:  # noqa: N801 - used as a function, as torch.autocast is
    """Within the block (or the decorated function), products take their inputs in
    ``dtype`` ("bfloat16" or "float16") and accumulate in float32 (see the module's
    docstring). PyTorch's signature: ``autocast(device_type, dtype=None, enabled=True,
    cache_enabled=None)``, ``device_type`` "cuda", "gpu" or "cpu" (the active backend's
    products round whichever is named; with no ``dtype``, PyTorch's default for it: float16
    for "cuda" and "gpu", bfloat16 for "cpu"); ``autocast()`` and ``autocast("bfloat16")``
    (a dtype first) are bfloat16 and that dtype. ``enabled=False`` turns it off inside an
    enclosing block. Blocks nest; each thread has its own."""

    def __init__(self, device_type=None, dtype=None, enabled: bool = True,
                 cache_enabled=None):
        enabled = checks.flag("autocast", "enabled", enabled)
        if cache_enabled is not None:
            checks.flag("autocast", "cache_enabled", cache_enabled)
        default = BFLOAT16
        if isinstance(device_type, str) and device_type.split(":")[0] in _DEVICE_TYPES:
            default = _DEVICE_TYPES[device_type.split(":")[0]]
        elif device_type is not None:
            if dtype is not None or _resolve(device_type) is None:
                raise bad_value("autocast", "device_type", device_type,
                                "'cuda', 'gpu' or 'cpu' (or a dtype: 'bfloat16', 'float16')")
            dtype = device_type                         # (autocast("bfloat16"))
        resolved = default if dtype is None else _resolve(dtype)
        if resolved is None:
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
            with autocast(dtype=self.dtype, enabled=self.enabled):
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


def keeps_float32(op: str) -> bool:
    """Whether ``op`` (a public op's or a kernel op's name) gives float32 now, whatever the
    float type of its inputs: one of FLOAT32_OPS under autocast."""
    return _local.dtype is not None and op in FLOAT32_OPS


def is_autocast_enabled() -> bool:
    """Whether products round their inputs in this thread now."""
    return active() is not None
