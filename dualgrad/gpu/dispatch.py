"""How the backend describes a dispatch: push constants, grids, and the per-shape recipes
of the elementwise, reduce and matmul dispatches (specialization constants, push-constant
integers, grid; everything but the addresses), cached because every op asks for one.

The recipes are cached per planner (plans.reduce_plan, plans.matmul_plan): one put in
their place (a test's, the benchmark's sweep) gets recipes of its own.
"""
from __future__ import annotations

import functools
import math
import struct
from typing import NamedTuple

import numpy as np

from ..api.errors import TensorTooLarge
from ..cpu.elementwise import broadcast_strides, pad4
from ..cpu.reduce import REDUCE_OPS, keepdims_shape
from . import plans

WG = 256
MAX_GROUPS = 65535
# The kernels index a tensor's elements with 32-bit integers, which SPIR-V's access chains
# read as signed (and a grid-stride loop must not wrap), so a tensor holds at most this many.
MAX_ELEMENTS = 2 ** 31 - 1
SUM, MEAN = REDUCE_OPS.index("sum"), REDUCE_OPS.index("mean")
COUNT_EQ = len(REDUCE_OPS)        # reduce.comp's extra op: ties with the maximum


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


@functools.lru_cache(maxsize=1024)      # called on every elementwise dispatch
def broadcast_layout(a_shape: tuple, b_shape: tuple, out_shape: tuple | None) -> tuple:
    """(output shape, the uints binary.comp takes packed (``packed_uints``), FLAT) for
    operands of these shapes; ``out_shape`` None: the broadcast of the two."""
    shape = np.broadcast_shapes(a_shape, b_shape) if out_shape is None else out_shape
    check_size(shape)
    s4 = pad4(shape)
    uints = (math.prod(shape), *s4, *broadcast_strides(a_shape, s4),
             *broadcast_strides(b_shape, s4))
    return (tuple(shape), packed_uints(tuple(int(u) for u in uints)),
            int(a_shape == b_shape == tuple(shape)))


# A split reduction finishes in its own dispatch (reduce.comp's FINISH: the last item of
# an output combines the partial results) where a counter per output fits in COUNTERS and,
# when one thread runs an item, that thread has at most FINISH_SPLITS partial results to
# combine alone; otherwise a second pass combines them.
COUNTERS = 1 << 16
FINISH_SPLITS = 64


class ReducePass(NamedTuple):
    """One dispatch of reduce.comp, all but its addresses."""
    spec: tuple                   # specialization constants
    uints: tuple                  # push constants after the five addresses
    groups: tuple
    partials: tuple | None        # the shape of the partial results it writes; None: the output
    finish: bool = False          # it also combines them into the output
    tail: bytes = b""             # uints, packed


@functools.lru_cache(maxsize=4096)      # called on every reduction
def reduce_passes(code: int, n_out: int, count: int, total: int, inner: int | None,
                  maps: tuple | None, planner) -> tuple:
    """Reduce ``count`` elements into each of ``n_out`` outputs (``total``: the count a mean
    divides by). ``inner``: the input is [outer][count][inner], or None to index it through
    the 4-D ``maps``. A split reduction writes (splits, n_out) partial results and combines
    them in the same dispatch (FINISH) where it can, else in a second pass (a mean divides
    only there; max's tie counts are summed there)."""
    plan = planner(n_out, count, inner == 1)
    final = plan.splits == 1
    finish = not final and n_out <= COUNTERS and (plan.group_items or
                                                  plan.splits <= FINISH_SPLITS)
    first = SUM if code == MEAN and not (final or finish) else code
    vec = inner == 1 and count % 4 == 0
    items = plan.splits * n_out
    groups = min(items, MAX_GROUPS) if plan.group_items else grid(items)[0]
    uints = (n_out, count, plan.splits, plan.chunk, total, inner or 1,
             *(maps if inner is None else (1,) * 16))
    this = ReducePass((first, int(plan.group_items), int(inner is not None), int(vec),
                       int(finish)), uints, (groups, 1, 1),
                      None if final else (plan.splits, n_out), finish, packed_uints(uints))
    if final or finish:
        return (this,)
    second = SUM if code == COUNT_EQ else code
    return (this,) + reduce_passes(second, n_out, plan.splits, total, n_out, None, planner)


@functools.lru_cache(maxsize=4096)      # called on every reduction
def reduce_recipe(code: int, shape: tuple, axes: tuple, planner) -> tuple:
    """The passes that reduce an array of ``shape`` over ``axes`` (none when the result
    is empty)."""
    x4 = pad4(shape)
    lead = 4 - len(shape)
    reduced = frozenset(a + lead for a in axes)
    st = strides4(x4)
    kd = [1 if d in reduced else int(x4[d]) for d in range(4)]
    rd = [int(x4[d]) if d in reduced else 1 for d in range(4)]
    n_out, count = math.prod(kd), math.prod(rd)
    if not n_out:
        return ()
    return reduce_passes(code, n_out, count, count, plans.reduce_layout(x4, reduced),
                         (*kd, *st, *rd, *st), planner)


@functools.lru_cache(maxsize=4096)      # called on every reduction
def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return keepdims_shape(shape, axes)
    return tuple(n for i, n in enumerate(shape) if i not in axes)


class SplitPass(NamedTuple):
    """The dispatch of split_bf16.comp that splits both operands of a product into the
    bfloat16 pieces the tensor-core kernel multiplies (three planes each, k-major), written
    into one allocation: A's pieces, then B's."""
    spec: tuple                   # (TRANSPOSE_0, TRANSPOSE_1): A's, B's
    uints: tuple                  # per operand: R, K, plane, the workgroups that walk it
    groups: tuple
    floats: tuple                 # each operand's pieces' size, in float32 words
    tail: bytes = b""             # uints, packed


EDGE_TILES_SHADER = "matmul_edges"   # the fma kernel where only edge tiles test
FMA_SHADERS = ("matmul", EDGE_TILES_SHADER)    # the fma kernel: same push constants, same
                                               # specialization, bias, relu, mask, row sums


class MatmulRecipe(NamedTuple):
    """One matmul dispatch (matmul.comp, matmul_edges.comp or matmul_bf16x6.comp), all but
    its addresses, and the split passes that feed the tensor-core kernel."""
    shader: str
    spec: tuple
    uints: tuple
    groups: tuple
    partials: tuple | None        # the shape of the split-K partial products, if any
    split: SplitPass | None = None    # the pass before the tensor-core kernel
    tail: bytes = b""             # uints, packed
    sums: bool = False            # it writes op(A)'s row sums too (ROWSUM_A)


def operand_split(shape: tuple, k_major: bool) -> tuple:
    """(transpose, (R, K, plane, workgroups), plane, batch stride; lengths in bfloat16
    values) of an operand stored with this shape (2-D, or 3-D for a batch), k-major
    ([k][r]) or not ([r][k]), as split_bf16.comp splits it: by words of 8 values, or
    transposed by blocks of 64 x 32, at most half of MAX_GROUPS workgroups walking them
    (the other operand's follow them in the same grid)."""
    batch = shape[0] if len(shape) == 3 else 1
    k, r = shape[-2:] if k_major else shape[-1:-3:-1]
    if r % 8:
        raise ValueError(f"split_pass: the operand's other extent ({r}) is not a multiple "
                         "of 8")
    plane = batch * k * r
    work = -(-plane // (8 * WG)) if k_major else -(-r // 64) * -(-k // 32) * batch
    groups = max(1, min(work, MAX_GROUPS // 2))
    return int(not k_major), (r, k, plane, groups), plane, k * r if len(shape) == 3 else 0


def split_pass(a_shape: tuple, a_k_major: bool, b_shape: tuple, b_k_major: bool) -> tuple:
    """(SplitPass, A's layout, B's layout) of a product's operands stored with these
    shapes, each layout its plane and batch stride (0: one matrix for the whole batch)."""
    ta, a_uints, a_plane, a_stride = operand_split(a_shape, a_k_major)
    tb, b_uints, b_plane, b_stride = operand_split(b_shape, b_k_major)
    uints = (*a_uints, *b_uints)
    return (SplitPass((ta, tb), uints, (a_uints[3] + b_uints[3], 1, 1),
                      (3 * a_plane // 2, 3 * b_plane // 2), packed_uints(uints)),
            (a_plane, a_stride), (b_plane, b_stride))


@functools.lru_cache(maxsize=4096)      # called on every matmul
def matmul_recipe(a_shape: tuple, b_shape: tuple, trans_a: bool, trans_b: bool,
                  m: int, n: int, k: int, batch: int, shared: int, threads: int,
                  tensor_cores: bool, planner, bias: bool = False,
                  relu: bool = False, mask: bool = False, sums: bool = False) -> MatmulRecipe:
    """The tile plans.matmul_plan picks on a device with these limits, as a dispatch; a
    split-K plan writes (batch * splits, m, n) partial products that the last slice of
    each tile adds within the dispatch, counting in at the reduction workspace's counters
    (one per tile, so K stays whole past COUNTERS tiles). ``bias``: matmul.comp adds a
    bias to every row as it stores C (BIAS), ``relu``: then applies relu to it (RELU_C),
    ``mask``: then zeroes it where a mask matrix is not > 0 (MASK_C); ``sums``: it writes
    op(A)'s row sums too (ROWSUM_A), where K is whole and the recipe says so. The
    tensor-core kernel does none of them, so its recipe does not say them."""
    ca, cb = a_shape[-1], b_shape[-1]
    a_sm, a_sk = (1, ca) if trans_a else (ca, 1)
    b_sk, b_sn = (1, cb) if trans_b else (cb, 1)
    a_bs = math.prod(a_shape) // batch if len(a_shape) == 3 else 0
    b_bs = math.prod(b_shape) // batch if len(b_shape) == 3 else 0
    plan = planner(m, n, k, batch, shared, threads, tensor_cores)
    t = plan.tile
    tiles = -(-n // t.bn) * -(-m // t.bm) * batch
    if plan.splits > 1 and tiles > COUNTERS:   # a counter per tile: else K stays whole
        plan = plans.sliced(t, k, 1)
    groups = (-(-n // t.bn), -(-m // t.bm), batch * plan.splits)
    if isinstance(t, plans.TensorTile):
        split, a_layout, b_layout = split_pass(a_shape, trans_a, b_shape, not trans_b)
        spec = (*t, t.threads)
        uints = (m, n, k, a_sm, a_sk, b_sk, b_sn, a_bs, b_bs, m * n, *a_layout, *b_layout)
        return MatmulRecipe(t.shader, spec, uints, groups, None, split, packed_uints(uints))
    # vec4 loads need 16-byte-aligned quads that lie wholly inside or outside the matrix:
    # the contiguous extent and every other stride a multiple of 4 (the pools align every
    # allocation to 256 bytes).
    a_vec = (m if trans_a else k) % 4 == 0 and a_bs % 4 == 0
    b_vec = (k if trans_b else n) % 4 == 0 and b_bs % 4 == 0
    split = plan.splits > 1
    # WHOLE: 1, every tile lies inside the matrix with K in whole steps (no bounds tests);
    # 2, M or N is not whole tiles, but some tiles lie inside: their workgroups take code
    # without tests, the edge tiles' code with them (matmul_edges.comp, which holds both).
    steps_whole = a_vec and b_vec and k % t.bk == 0 and plan.kc % t.bk == 0
    whole = (0 if not steps_whole or m < t.bm or n < t.bn else
             1 if m % t.bm == 0 and n % t.bn == 0 else 2)
    sums = sums and not split and t.threads >= t.bm     # (a thread for each row's sum)
    spec = (*t, int(trans_a), int(trans_b), int(a_vec), int(b_vec), int(n % 4 == 0),
            plan.splits, t.threads, whole, int(bias), int(relu), int(mask), int(sums))
    uints = (m, n, k, a_sm, a_sk, b_sk, b_sn, a_bs, b_bs, m * n, plan.kc)
    return MatmulRecipe(EDGE_TILES_SHADER if whole == 2 else t.shader, spec, uints, groups,
                        (batch * plan.splits, m, n) if split else None, None, packed_uints(uints),
                        sums)


def strides4(shape4) -> list:
    """Row-major element strides of a 4-D shape."""
    s, step = [0, 0, 0, 0], 1
    for d in range(3, -1, -1):
        s[d] = step
        step *= int(shape4[d])
    return s
