"""Matrix products: matmul.comp and matmul_edges.comp (the float32 fma kernel, which applies
the product's epilogue as it stores C) and, on devices with tensor cores, split_f16.comp
then matmul_f16x3.comp (float32-accurate products from scaled float16 pieces), or
split_bf16.comp then matmul_bf16x6.comp (autocast's, from bfloat16 ones); the twins of
``dualgrad/cpu/matmul.py``. The tile and split of a product are ``plans.matmul_plan``'s;
its recipe (everything but the addresses) is cached per shape: every product asks."""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import ml_dtypes
import numpy as np

from ...backend import PLAIN, Epilogue
from ...errors import DeviceError
from .. import plans
from ..dispatch import MAX_GROUPS, ROUND16, WG, packed_uints, packer
from ..memory import DeviceArray
from ..workspace import COUNTER, COUNTERS
from . import elementwise, logic, reduce, strided

F32, BFLOAT16 = np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)

EDGE_TILES_SHADER = "matmul_edges"   # the fma kernel where only edge tiles test
FMA_SHADERS = ("matmul", EDGE_TILES_SHADER)    # the fma kernel: same push constants, same
                                               # specialization, and the epilogue
_ADDRESS, _ADDRESSES4, _ADDRESSES5, _ADDRESSES8 = packer(1), packer(4), packer(5), packer(8)
_ADDRESSES2 = packer(2)


class SplitPass(NamedTuple):
    """The dispatch of split_bf16.comp that splits both operands of a product into the
    bfloat16 pieces the tensor-core kernel multiplies (three planes each, k-major), written
    into one allocation: A's pieces, then B's; or split_f16.comp's two (``rows``: the
    operands' rows, each scaled by its own power of two), their maxima, then two float16
    pieces."""
    spec: tuple                   # (TRANSPOSE_0, TRANSPOSE_1, PIECES, ROUND16); split_f16's:
                                  # (TRANSPOSE_0, TRANSPOSE_1), MAXIMA added at launch
    uints: tuple                  # per operand: R, K, plane, the workgroups that walk it
    groups: tuple
    floats: tuple                 # each operand's pieces' size, in float32 words
    tail: bytes = b""             # uints, packed
    rows: tuple = ()              # split_f16's: each operand's rows (batch R), one scale each
    maxima_groups: tuple = ()     # split_f16's maxima dispatch: its own grid, and the uints
    maxima_tail: bytes = b""      # it is given (the split's, with its own workgroup counts)


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


def maxima_groups(r: int, k: int, batch: int, k_major: bool) -> int:
    """The workgroups split_f16.comp's maxima dispatch walks an operand with: 256 rows by
    128 values of k of a k-major one a workgroup, or 8 runs of 512 values of k of a [r][k]
    one (the split's own grid would leave most of them with nothing to do)."""
    work = batch * -(-r // 256) * -(-k // 128) if k_major else -(-batch * r * -(-k // 512) // 8)
    return max(1, min(work, MAX_GROUPS // 2))


def split_pass(a_shape: tuple, a_k_major: bool, b_shape: tuple, b_k_major: bool,
               pieces: int = 3, round16: int = 0, halves: bool = False) -> tuple:
    """(SplitPass, A's layout, B's layout) of a product's operands stored with these
    shapes, each layout its plane and batch stride (0: one matrix for the whole batch);
    ``pieces``: 3 (the exact split) or 1 (bfloat16 rounding alone); ``round16``: the
    16-bit type's code the float32 operands are rounded to, + 4 where A is stored in it,
    + 8 where B is; ``halves``: split_f16.comp's two scaled float16 pieces instead (float32
    operands only)."""
    ta, a_uints, a_plane, a_stride = operand_split(a_shape, a_k_major)
    tb, b_uints, b_plane, b_stride = operand_split(b_shape, b_k_major)
    uints = (*a_uints, *b_uints)
    layouts = (a_plane, a_stride), (b_plane, b_stride)
    groups = (a_uints[3] + b_uints[3], 1, 1)
    if halves:
        rows = (a_plane // a_uints[1], b_plane // b_uints[1])      # batch R: plane / K
        na, nb = (maxima_groups(r, k, plane // (r * k), not t)
                  for t, (r, k, plane, _) in ((ta, a_uints), (tb, b_uints)))
        maxima = (*a_uints[:3], na, *b_uints[:3], nb)
        return (SplitPass((ta, tb), uints, groups, (a_plane, b_plane), packed_uints(uints),
                          rows, (na + nb, 1, 1), packed_uints(maxima)), *layouts)
    return (SplitPass((ta, tb, pieces, round16), uints, groups,
                      (pieces * a_plane // 2, pieces * b_plane // 2), packed_uints(uints)),
            *layouts)


@functools.lru_cache(maxsize=4096)      # called on every matmul
def matmul_recipe(a_shape: tuple, b_shape: tuple, trans_a: bool, trans_b: bool, dims: tuple,
                  limits: tuple, planner, kind: tuple = PLAIN.kind,
                  pieces: int = 3, round16: int = 0) -> MatmulRecipe:
    """The tile ``planner`` picks for a product of ``dims`` (m, n, k, batch) on a device
    with these ``limits`` (shared memory, threads a workgroup, tensor cores), as a
    dispatch; ``kind`` is the epilogue's (``Epilogue.kind``). A split-K plan writes
    (batch * splits, m, n) partial products that the last slice of each tile adds within
    the dispatch, counting in at the workspace's counters (one per tile, so K stays whole
    past COUNTERS tiles). The fma kernel applies the epilogue as it stores C (BIAS, RELU_C,
    MASK_C) and writes op(A)'s row sums (ROWSUM_A) where K is whole and the tile has a
    thread for each row; the tensor-core kernels apply the bias and the relu to a 16-bit C,
    and the float16 pieces' one all three to a float32 C (never the row sums). ``pieces``
    (the tensor-core kernel's): 3, float32-accurate (two scaled float16 pieces,
    matmul_f16x3.comp, where the operands are float32 and taken as they are; else three
    bfloat16 ones); 1, the product of the operands rounded to bfloat16.
    ``round16`` (both kernels' ROUND16): 1 or 2, the operands rounded to float16 or
    bfloat16 as they are loaded; + 4, A stored in that type, + 8, B, + 16, C."""
    m, n, k, batch = dims
    bias, relu, mask, sums = kind
    ca, cb = a_shape[-1], b_shape[-1]
    a_sm, a_sk = (1, ca) if trans_a else (ca, 1)
    b_sk, b_sn = (1, cb) if trans_b else (cb, 1)
    a_bs = math.prod(a_shape) // batch if len(a_shape) == 3 else 0
    b_bs = math.prod(b_shape) // batch if len(b_shape) == 3 else 0
    plan = planner(m, n, k, batch, *limits, pieces)
    t = plan.tile
    if isinstance(t, plans.TensorTile):        # (K whole: no split)
        halves = pieces == 3 and round16 == 0
        if pieces == 1:
            t = plans.one_piece(t, limits[0])
        elif halves:
            t = plans.halves(t, limits[0])
        groups = (-(-n // t.bn), -(-m // t.bm), batch)
        split, a_layout, b_layout = split_pass(a_shape, trans_a, b_shape, not trans_b,
                                               pieces, round16 & 15, halves)
        fused = bool(round16 & 16) or halves       # (which applies the bias and the relu)
        spec = (*t, t.threads, 2 if halves else pieces, round16, int(fused and bias),
                int(fused and relu), int(halves and mask))
        uints = (m, n, k, a_sm, a_sk, b_sk, b_sn, a_bs, b_bs, m * n, *a_layout, *b_layout)
        return MatmulRecipe(plans.HALVES_SHADER if halves else t.shader, spec, uints, groups,
                            None, split, packed_uints(uints))
    # vec4 loads need 16-byte-aligned quads that lie wholly inside or outside the matrix:
    # the contiguous extent and every other stride a multiple of 4 (the pools align every
    # allocation to 256 bytes).
    a_vec = (m if trans_a else k) % 4 == 0 and a_bs % 4 == 0
    b_vec = (k if trans_b else n) % 4 == 0 and b_bs % 4 == 0
    return fma_recipe(plan, dims, (trans_a, trans_b), (a_vec, b_vec),
                      (a_sm, a_sk, b_sk, b_sn, a_bs, b_bs, m * n), kind, round16)


def fma_recipe(plan: plans.MatmulPlan, dims: tuple, trans: tuple, vec: tuple,
               strides: tuple, kind: tuple = PLAIN.kind, round16: int = 0,
               windows: tuple = ()) -> MatmulRecipe:
    """The fma kernel's dispatch of ``plan`` for a product of ``dims`` (m, n, k, batch):
    operands transposed (``trans``) and read by vec4 (``vec``) or not, ``strides`` (a_sm,
    a_sk, b_sk, b_sn, a_bs, b_bs, c_bs); ``windows``, the WINDOWS constants (mode and
    geometry) of a convolution's product (conv.py)."""
    m, n, k, batch = dims
    bias, relu, mask, sums = kind
    t = plan.tile
    if plan.splits > 1 and -(-n // t.bn) * -(-m // t.bm) * batch > COUNTERS:
        plan = plans.sliced(t, k, 1)        # a counter per tile: else K stays whole
    split = plan.splits > 1
    # WHOLE: 1, every tile lies inside the matrix with K in whole steps (no bounds tests);
    # 2, M or N is not whole tiles, but some tiles lie inside: their workgroups take code
    # without tests, the edge tiles' code with them (matmul_edges.comp, which holds both).
    steps_whole = vec[0] and vec[1] and k % t.bk == 0 and plan.kc % t.bk == 0
    whole = (0 if not steps_whole or m < t.bm or n < t.bn else
             1 if m % t.bm == 0 and n % t.bn == 0 else 2)
    sums = sums and not split and t.threads >= t.bm     # (a thread for each row's sum)
    spec = (*t, int(trans[0]), int(trans[1]), int(vec[0]), int(vec[1]), int(n % 4 == 0),
            plan.splits, t.threads, whole, int(bias), int(relu), int(mask), int(sums),
            round16, *windows)
    uints = (m, n, k, *strides, plan.kc)
    groups = (-(-n // t.bn), -(-m // t.bm), batch * plan.splits)
    return MatmulRecipe(EDGE_TILES_SHADER if whole == 2 else t.shader, spec, uints, groups,
                        (batch * plan.splits, m, n) if split else None, None,
                        packed_uints(uints), sums)


def _offset(h: DeviceArray, elements: int) -> DeviceArray:
    """``h`` read from ``elements`` further on (with the same shape, so the same strides):
    a band of a product's operand. Its span stays the whole of ``h``'s (hazards are
    tracked as for the whole)."""
    view = DeviceArray(h.alloc, h.shape, h.dtype, None, h.size)
    view.address = h.address + elements * h.dtype.itemsize
    view.span = h.span
    return view


def band(h: DeviceArray, first: int, count: int, shape: tuple | None = None) -> DeviceArray:
    """Items ``first`` to ``first + count`` of a batch (N, ...) of them, in place, with
    ``shape`` where given (a view's own: ``Device.reshape`` would lose its offset)."""
    each = h.size // h.shape[0]
    view = _offset(h, first * each)
    view.shape = shape or (count,) + tuple(h.shape[1:])
    view.size = count * each
    view.nbytes = view.size * h.dtype.itemsize
    return view


def _batch_band(h: DeviceArray, first: int, count: int) -> DeviceArray:
    """Matrices ``first`` to ``first + count`` of a batched (3-D) operand or product; a
    2-D one (shared by the batch) as it is."""
    return band(h, first, count) if len(h.shape) == 3 else h


def rounded(dev, x, low):
    """``x`` rounded to the 16-bit type ``low`` and back to float32 (convert16.comp twice;
    once for storage of that type)."""
    return logic.cast(dev, x if x.dtype == low else logic.cast(dev, x, low), F32)


def matmul(dev, a, b, trans_a=False, trans_b=False, out=None, epilogue=PLAIN, low=None,
           result=None):
    ra, ca = a.shape[-2:]
    rb, cb = b.shape[-2:]
    m, k = (ca, ra) if trans_a else (ra, ca)
    n = rb if trans_b else cb
    batched = len(a.shape) == 3 or len(b.shape) == 3
    batch = a.shape[0] if len(a.shape) == 3 else (b.shape[0] if len(b.shape) == 3 else 1)
    if out is None:
        out = dev.empty((batch, m, n) if batched else (m, n), F32 if result is None
                        else result)
    sums = epilogue.row_sums
    fused = out.size and product_into(dev, a, b, out, trans_a, trans_b, (m, n, k, batch),
                                      epilogue, low=low)
    if sums is not None and not fused:     # op(a)'s row sums by a reduction of their own
        reduce.reduce(dev, "sum", a if low is None else rounded(dev, a, low),
                      (len(a.shape) - (2 if trans_a else 1),), out=sums)
    return out


def product_into(dev, a, b, out, trans_a, trans_b, dims, epilogue=PLAIN,
                 tensor_cores=True, low=None) -> bool:
    """Record the product op(a) @ op(b) of ``dims`` (m, n, k, batch) into ``out``; True
    where the epilogue's row sums were written with it (the fma kernel's ROWSUM_A: one
    matrix, whole K), else the caller makes them. ``low``: the operands rounded to that
    16-bit type first (the fma kernel rounds them as it loads them, the tensor-core
    kernel's split pass as it reads them: bfloat16 in one piece, float16 in three). An
    operand may be storage of type ``low``, which both kernels read so (ROUND16's + 4 for
    A, + 8 for B); so may ``out``, which they store so (+ 16: the fma kernel where it
    stores quads; the tensor-core kernel with the bias and the relu but not the mask),
    else a float32 product is rounded."""
    m, n, k, batch = dims
    kind = epilogue.kind
    if kind[3] and (batch != 1 or len(a.shape) != 2):     # row sums of one matrix only
        kind = kind[:3] + (False,)
    limits = dev.matmul_limits if tensor_cores else dev.fma_limits
    pieces = 1 if low == BFLOAT16 else 3         # (a tensor-core product's; fma: unused)
    r = matmul_recipe(a.shape, b.shape, trans_a, trans_b, dims, limits, plans.matmul_plan,
                      kind, pieces)
    tensor = r.split is not None
    if out.dtype != F32 and (out.dtype != low or max(r.groups) > MAX_GROUPS or
                             (kind[2] if tensor else not r.spec[9])):
        # a 16-bit C, stored so in one grid (by the fma kernel as quads, C_VEC); else a
        # float32 product, rounded
        wide = dev.empty(out.shape)
        sums = product_into(dev, a, b, wide, trans_a, trans_b, dims, epilogue, tensor_cores,
                            low)
        logic.cast(dev, wide, out.dtype, out=out)
        return sums
    if low is not None:
        stored = 4 * (a.dtype == low) + 8 * (b.dtype == low) + 16 * (out.dtype == low)
        r = matmul_recipe(a.shape, b.shape, trans_a, trans_b, dims, limits,
                          plans.matmul_plan, kind, pieces, ROUND16[low] + stored)
    gx, gy, gz = r.groups
    if gx > MAX_GROUPS or gy > MAX_GROUPS or gz > MAX_GROUPS:
        _bands(dev, a, b, out, trans_a, trans_b, dims, epilogue, r, low)
        return False
    split = r.split
    if split is not None and split.rows:        # scaled float16 pieces
        _launch_halves(dev, r, a, b, out, epilogue)
        return False
    if split is not None:         # the tensor-core kernel's bf16 pieces, A's then B's
        pieces, a_pieces, b_pieces = _pieces(dev, split)
        dev.launch("split_bf16", split.spec,
                   _ADDRESSES4.pack(a.address, a_pieces, b.address, b_pieces) + split.tail,
                   split.groups, [a, b], [pieces])
    if r.shader in FMA_SHADERS:          # (it applies the epilogue itself)
        return launch_fma(dev, r, a, b, out, epilogue)
    push = _ADDRESSES5.pack(a.address, b.address, out.address, a_pieces, b_pieces) + r.tail
    if out.dtype != F32:                 # (the kernel adds the bias and applies the relu)
        bias = epilogue.bias
        dev.launch(r.shader, r.spec, push + _ADDRESS.pack(bias.address if bias is not None else 0),
                   r.groups, [a, b, pieces, bias], [out])
        return False
    dev.launch(r.shader, r.spec, push, r.groups, [a, b, pieces], [out])
    _epilogue_apart(dev, out, epilogue)
    return False


def _pieces(dev, split: SplitPass) -> tuple:
    """One allocation for both operands' pieces, and the addresses of A's and of B's."""
    pieces = dev.empty((split.floats[0] + split.floats[1],))
    return pieces, pieces.address, pieces.address + 4 * split.floats[0]


def _launch_halves(dev, r: MatmulRecipe, a, b, out, epilogue: Epilogue) -> None:
    """Record a float32-accurate product on float16 pieces: split_f16.comp's rows' maxima
    (into zeroed scales), its split, then matmul_f16x3.comp, which reads the maxima too and
    applies the epilogue's bias, relu and mask (not its row sums)."""
    split = r.split
    pieces, a_pieces, b_pieces = _pieces(dev, split)
    scales = dev.empty((split.rows[0] + split.rows[1],), np.int32)
    dev.fill(scales, 0)
    a_scales, b_scales = scales.address, scales.address + 4 * split.rows[0]
    addresses = _ADDRESSES4.pack(a.address, a_pieces, b.address, b_pieces)
    scale_addresses = _ADDRESSES2.pack(a_scales, b_scales)
    dev.launch("split_f16", split.spec + (1,), addresses + split.maxima_tail + scale_addresses,
               split.maxima_groups, [a, b], [scales])
    dev.launch("split_f16", split.spec + (0,), addresses + split.tail + scale_addresses,
               split.groups, [a, b, scales], [pieces])
    bias, mask = epilogue.bias, epilogue.mask
    tail = _ADDRESSES4.pack(bias.address if bias is not None else 0, a_scales, b_scales,
                            mask.address if mask is not None else 0)
    dev.launch(r.shader, r.spec,
               _ADDRESSES5.pack(a.address, b.address, out.address, a_pieces, b_pieces) + r.tail
               + tail, r.groups, [a, b, pieces, scales, bias, mask], [out])


def launch_fma(dev, r: MatmulRecipe, a, b, out, epilogue: Epilogue = PLAIN) -> bool:
    """Record the fma kernel's dispatch ``r`` of a @ b into ``out``, with split K's scratch
    and tile counters where it has slices; True where it wrote the row sums too."""
    bias, mask, sums = epilogue.bias, epilogue.mask, epilogue.row_sums
    with dev.lock:                              # (a workspace range taken for it)
        if r.partials is None:                  # (W and the counters unused)
            extra, writes = (0, 0), [out]
        else:                                   # split K: scratch and tile counters
            gx, gy, gz = r.groups
            splits = r.spec[10]                 # (SPLITS)
            counters = dev.workspace.take(COUNTER, gx * gy * gz // splits)     # one a tile
            partials, writes = dev.workspace.partials(r.partials, [out])
            extra = (partials, counters)
        if r.sums:
            writes.append(sums)
        push = _ADDRESSES8.pack(a.address, b.address, out.address, *extra,
                                bias.address if bias is not None else 0,
                                mask.address if mask is not None else 0,
                                sums.address if r.sums else 0) + r.tail
        dev.launch(r.shader, r.spec, push, r.groups, [a, b, bias, mask], writes)
    return r.sums


def _epilogue_apart(dev, out, epilogue: Epilogue) -> None:
    """The bias, the relu and the mask of a product made without them, as separate ops in
    place (the same bits as the fma kernel's)."""
    if epilogue.bias is not None:
        elementwise.binary(dev, "add", out, epilogue.bias, out=out)
    if epilogue.relu:
        elementwise.unary(dev, "relu", out, out=out)
    if epilogue.mask is not None:
        elementwise.unary_backward(dev, "relu", epilogue.mask, epilogue.mask, out, out=out)


def _bands(dev, a, b, out, trans_a, trans_b, dims, epilogue, r, low=None) -> None:
    """A product whose grid passes a dimension's MAX_GROUPS workgroups (a tall, wide or
    many-times batched one), as several: bands of the batch, or of C's rows, each read
    and written through addresses offset into the operands (the fma kernel only: the
    tensor-core kernel's split pass reads whole operands); too many columns, as the
    transposed product, transposed back. Row sums are left to the caller."""
    m, n, k, batch = dims
    if r.groups[0] > MAX_GROUPS:            # C^T = op(B)^T op(A)^T has them as rows
        shape_t = (batch, n, m) if len(out.shape) == 3 else (n, m)
        product_t = dev.empty(shape_t)
        product_into(dev, b, a, product_t, not trans_b, not trans_a, (n, m, k, batch),
                     low=low)
        strided.permute_into(dev, product_t, (0, 2, 1) if len(shape_t) == 3 else (1, 0), out)
        _epilogue_apart(dev, out, epilogue)
        return
    # Bands of the batch (of one matrix where the rows need bands too). A band of 128
    # matrices or more is never split, and a split product's grid holds fewer than 256
    # workgroups: each band's grid fits.
    if batch > 1:
        band = MAX_GROUPS if r.groups[1] <= MAX_GROUPS else 1
        if band >= batch:
            raise DeviceError(f"internal: no band of the {r.groups} grid fits")
        for b0 in range(0, batch, band):
            nb = min(band, batch - b0)
            a_, b_, out_ = (_batch_band(x, b0, nb) for x in (a, b, out))
            mask = epilogue.mask
            band_epilogue = Epilogue(epilogue.bias, epilogue.relu,
                                     _batch_band(mask, b0, nb) if mask is not None else None)
            product_into(dev, a_, b_, out_, trans_a, trans_b, (m, n, k, nb), band_epilogue,
                         tensor_cores=False, low=low)
        return
    # Bands of C's rows: every tile has 16 rows or more, and a band starting at a
    # multiple of 16 rows keeps the operands 16-byte aligned for vec4 loads.
    rows = MAX_GROUPS * 16
    if rows >= m:
        raise DeviceError(f"internal: no band of the {r.groups} grid fits")
    a_row = 1 if trans_a else a.shape[-1]       # op(A)'s row stride
    for r0 in range(0, m, rows):
        mask = epilogue.mask
        band_epilogue = Epilogue(epilogue.bias, epilogue.relu,
                                 _offset(mask, r0 * n) if mask is not None else None)
        product_into(dev, _offset(a, r0 * a_row), b, _offset(out, r0 * n), trans_a, trans_b,
                     (min(rows, m - r0), n, k, batch), band_epilogue, tensor_cores=False,
                     low=low)
