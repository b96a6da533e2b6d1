"""float32 <-> float16 and bfloat16 on the bits: the twin of shaders/round16.glsl.

NumPy's float16 conversions and ml_dtypes' bfloat16 ones are exact but slow here (float32
to float16 about 2.5 ns an element, NumPy having no F16C path; to bfloat16 0.9): these are
the same roundings in integer arithmetic written as selects, which the compiler turns into
vector instructions, on every core. Rounding is to nearest even; past float16's largest
finite value a result is inf; subnormal results are kept (a float16 subnormal is k units
of 2^-24: |x| 2^24 rounded to an integer, exactly what float32's rint gives); a NaN stays
NaN with its sign (quiet). Widening is exact. tests/test_low_precision.py holds them to
NumPy's and ml_dtypes' conversions bit for bit on every 16-bit pattern and on float32
values at, beside and halfway between 16-bit ones.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
from numba import types

from . import split
from .jit import kernel, scalar
from .vmath import bitcast

FLOAT16, BFLOAT16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
_bits = bitcast(types.float32, types.uint32)
_value = bitcast(types.uint32, types.float32)


@kernel
def _widen_bf16(src, dst):
    for i in range(src.size):
        dst[i] = np.uint32(src[i]) << np.uint32(16)


@scalar
def _to_bf16(u):
    quiet = (u >> np.uint32(16)) | np.uint32(0x40)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return quiet if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000) else rounded


@kernel
def _narrow_bf16(src, dst):
    for i in range(src.size):
        dst[i] = np.uint16(_to_bf16(src[i]))


@scalar
def _from_half(h):
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    e = (h >> np.uint32(10)) & np.uint32(0x1F)
    m = h & np.uint32(0x3FF)
    tiny = sign | _bits(np.float32(m) * np.float32(2.0 ** -24))     # (exact)
    normal = sign | ((e + np.uint32(112)) << np.uint32(23)) | (m << np.uint32(13))
    special = sign | np.uint32(0x7F800000) | (m << np.uint32(13))
    return tiny if e == 0 else (special if e == 31 else normal)


@kernel
def _widen_f16(src, dst):
    for i in range(src.size):
        dst[i] = _from_half(np.uint32(src[i]))


@scalar
def _to_half(u):
    sign = (u >> np.uint32(16)) & np.uint32(0x8000)
    a = u & np.uint32(0x7FFFFFFF)
    nan = sign | np.uint32(0x7E00) | ((a >> np.uint32(13)) & np.uint32(0x3FF))
    r = a - np.uint32(0x38000000)                  # the exponent's bias 127 -> 15
    normal = sign | ((r + np.uint32(0x0FFF) + ((r >> np.uint32(13)) & np.uint32(1)))
                     >> np.uint32(13))             # (a carry moves into the exponent)
    tiny = sign | np.uint32(np.rint(_value(np.uint32(a)) * np.float32(2.0 ** 24)))
    if a > np.uint32(0x7F800000):
        return nan
    if a >= np.uint32(0x477FF000):                 # 65520 and up (ties to even) -> inf
        return sign | np.uint32(0x7C00)
    return normal if a >= np.uint32(0x38800000) else tiny


@kernel
def _narrow_f16(src, dst):
    for i in range(src.size):
        dst[i] = np.uint16(_to_half(src[i]))


# The kernels that compute on 16-bit storage in place (cpu/unary.py, cpu/binary.py) take
# these per element; ``kind`` is gpu/dispatch.py's ROUND16 code, a constant of the kernel.
KIND = {FLOAT16: 1, BFLOAT16: 2}


@scalar
def from16(bits, kind):
    """The float32 value of a 16-bit element's bits."""
    u = np.uint32(bits)
    return _value(np.uint32(_from_half(u) if kind == 1 else u << np.uint32(16)))


@scalar
def to16(v, kind):
    """A float32 value rounded to the 16-bit type: its bits."""
    u = np.uint32(_bits(np.float32(v)))
    return np.uint16(_to_half(u) if kind == 1 else _to_bf16(u))


def bits(*arrays) -> tuple:
    """16-bit arrays as flat uint16 views of their storage, as those kernels take them."""
    return tuple(np.ascontiguousarray(a).reshape(-1).view(np.uint16) for a in arrays)


WIDEN = {FLOAT16: _widen_f16, BFLOAT16: _widen_bf16}
NARROW = {FLOAT16: _narrow_f16, BFLOAT16: _narrow_bf16}


def widen(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A float16 or bfloat16 array as float32 (exact)."""
    out = np.empty(x.shape, np.float32) if out is None else out
    split.run(WIDEN[x.dtype], (np.ascontiguousarray(x).reshape(-1).view(np.uint16),
                                out.reshape(-1).view(np.uint32)))
    return out


def narrow(x: np.ndarray, dtype, out: np.ndarray | None = None) -> np.ndarray:
    """A float32 array rounded to float16 or bfloat16 (``dtype``)."""
    dtype = np.dtype(dtype)
    out = np.empty(x.shape, dtype) if out is None else out
    split.run(NARROW[dtype], (np.ascontiguousarray(x, np.float32).reshape(-1)
                               .view(np.uint32), out.reshape(-1).view(np.uint16)))
    return out
