"""How a dispatch is described: push constants packed as the shaders declare them, and
the grids of the one-dimensional kernels. Each kernel family's own recipes (tiles, splits,
strides) are in its module under ``kernels/``."""
from __future__ import annotations

import functools
import math
import struct

import ml_dtypes
import numpy as np

from ..errors import TensorTooLarge

WG = 256
MAX_GROUPS = 65535
# The shaders' codes of the 16-bit float types (matmul.glsl's ROUND16, unary.comp's LOW).
ROUND16 = {np.dtype(np.float16): 1, np.dtype(ml_dtypes.bfloat16): 2}
# The kernels index a tensor's elements with 32-bit integers, which SPIR-V's access chains
# read as signed (and a grid-stride loop must not wrap), so a tensor holds at most this many.
MAX_ELEMENTS = 2 ** 31 - 1


@functools.lru_cache(maxsize=64)
def packer(addrs: int, uints: int = 0, floats: int = 0) -> struct.Struct:
    """The layout of push constants as the shaders declare them: addresses, then uints,
    then floats (no padding: the addresses come first)."""
    return struct.Struct(f"<{addrs}Q{uints}I{floats}f")


def push_constants(addrs, uints=(), floats=()) -> bytes:
    """Push constants as the shaders declare them: addresses, then uints, then floats."""
    return packer(len(addrs), len(uints), len(floats)).pack(*addrs, *uints, *floats)


def packed_uints(uints: tuple) -> bytes:
    """The uints of a recipe as the tail of its push constants: the hot dispatches pack
    only their addresses per call (``packer(n).pack(...) + tail``), a third of the time
    of packing everything."""
    return struct.pack(f"<{len(uints)}I", *uints)


def check_size(shape) -> int:
    """The number of elements of a tensor of this shape, or TensorTooLarge past
    MAX_ELEMENTS (before any memory is asked for)."""
    size = math.prod(shape)
    if size > MAX_ELEMENTS:
        raise TensorTooLarge(
            f"a tensor of shape {tuple(shape)} has {size} elements; the gpu backend's kernels "
            f"index at most {MAX_ELEMENTS} (2**31 - 1) a tensor: split it, or use the cpu "
            f"backend")
    return size


def grid(n: int) -> tuple:
    """The grid of a kernel whose threads take one element each (at most MAX_GROUPS
    workgroups: the kernels loop over what is left)."""
    g = -(-n // WG)                   # (no min/max calls: every dispatch asks)
    return (g if 0 < g <= MAX_GROUPS else MAX_GROUPS if g else 1, 1, 1)


def quad_grid(n: int) -> tuple:
    """The grid of a kernel whose threads take four elements each (unary.comp, binary.comp
    on same-shaped operands)."""
    g = -(-n // (4 * WG))
    return (g if 0 < g <= MAX_GROUPS else MAX_GROUPS if g else 1, 1, 1)
