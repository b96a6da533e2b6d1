"""How the matmul and reduce shaders are cut into dispatches: tile shapes, split K, and
multi-pass reductions. Arithmetic on sizes only, so it is testable without a device.

A big GPU needs a few hundred workgroups in flight to be busy; a problem that yields fewer
(a skinny matmul, a full reduction) is split along its summed dimension, and the partial
results are summed afterwards: by the last workgroup to finish its share, within the same
dispatch (matmul.comp's split K, reduce.comp's FINISH), or by a small second pass. A
float32 sum of partial sums is still a sum of the same terms in some order, so the
gamma(n) bounds of the tolerance table hold unchanged.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

WG = 256                          # threads per workgroup of reduce.comp


class Tile(NamedTuple):
    """A matmul.comp tile: bm x bn outputs per workgroup, K in steps of bk, and tm x tn
    outputs per thread (tm and tn multiples of 4)."""
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    shader = "matmul"

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def shared_bytes(self) -> int:
        return 2 * 4 * self.bk * (self.bm + self.bn)        # two buffers of each operand

    def fits(self, shared: int = 48 << 10, threads: int = 1024) -> bool:
        """Whether matmul.comp can run it on a device with these limits: every thread
        loads whole quads of both tiles each K step, the lanes of a warp tile the grid of
        threads, tile sides are powers of two, and the tiles fit in shared memory."""
        t = self.threads
        wx, wy = self.bn // self.tn, self.bm // self.tm     # the grid of threads
        lx = min(8, wx)                                     # a warp's lanes: lx x ly
        ly = min(32 // lx, wy)
        pow2 = all(v & (v - 1) == 0 for v in (self.bm, self.bn))   # quad swizzles: XOR
        return (self.tm % 4 == 0 and self.tn % 4 == 0 and self.bk % 4 == 0 and pow2
                and wx % lx == 0 and wy % ly == 0
                and self.bm * self.bk // 4 % t == 0 and self.bk * self.bn // 4 % t == 0
                and self.bm * self.bk >= 4 * t and self.bk * self.bn >= 4 * t
                and self.shared_bytes <= shared and t <= threads)


class TensorTile(NamedTuple):
    """A matmul_bf16x6.comp tile: bm x bn outputs per workgroup, K in steps of bk (a
    multiple of 16), each warp (a subgroup of 32) wm x wn of them in 16 x 16 blocks."""
    bm: int
    bn: int
    bk: int
    wm: int
    wn: int

    shader = "matmul_bf16x6"

    @property
    def threads(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn) * 32

    @property
    def shared_bytes(self) -> int:
        """Three bfloat16 pieces of each operand's tile, k-major: bk rows of bm (bn)
        values, each padded by 8."""
        return self.pieces_bytes(3)

    def pieces_bytes(self, pieces: int) -> int:
        """The shared tiles of ``pieces`` bfloat16 pieces of each operand."""
        return pieces * 2 * self.bk * (self.bm + 8 + self.bn + 8)

    def fits(self, shared: int = 48 << 10, threads: int = 1024, pieces: int = 3) -> bool:
        """Whether matmul_bf16x6.comp can run it with ``pieces`` pieces of each operand:
        whole 16 x 16 blocks per warp and the device's limits."""
        return (self.bk % 16 == 0 and self.wm % 16 == 0 and self.wn % 16 == 0
                and self.bm % self.wm == 0 and self.bn % self.wn == 0
                and self.pieces_bytes(pieces) <= shared and self.threads <= threads)


# The widest tile wins once it yields about one workgroup per SM; smaller products are bound
# by the latency of their few K steps, where K steps of 32 win (measured on an H200:
# docs/performance.md).
TILES = {
    "wide": Tile(128, 256, 16, 8, 8),      # big products: 512 threads, 64 outputs each
    "square": Tile(128, 128, 8, 8, 8),     # mid-sized ones
    "deep": Tile(128, 64, 32, 4, 8),       # small ones: 48 KiB, 256 threads
    "medium": Tile(64, 64, 16, 4, 4),      # ... other K, or where "deep" does not fit
                                           # (16 KiB, 256 threads: every device has it)
    "rows": Tile(32, 64, 32, 4, 4),        # M <= 16 (a weight gradient of a small layer)
    "cols": Tile(64, 16, 32, 4, 4),        # N <= 16 (a small layer's forward)
}
MIN_DEEP_K = 64                   # two of "deep"'s K steps
WIDE_GROUPS = 120                 # about one workgroup of "wide" per SM
SQUARE_GROUPS = 64
# Below two workgroups of "square" per SM, "deep"'s twice as many take less time (H100, 4096
# rows by 256 or 768 columns: 0.78-0.88 of square's time, split or not; 4096 x 1024 x 256,
# 256 of them, 1.07: bench/RESULTS.md).
SQUARE_OVER_DEEP = 256
# Split K: K is halved until there are about as many slices as SMs (an H200 has 132), and
# the last slice of each tile adds the partial products within the dispatch; below
# SPLIT_FROM_K the half of the K loop a split saves is worth less than its epilogue.
BUSY_GROUPS = 128
MIN_SPLIT_K = 128                 # the fewest K a split-K workgroup walks
SPLIT_FROM_K = 512
# Products on tensor cores (where the device has them): whole 16 x 16 output blocks, K deep
# enough for the float32 error bound (tolerances.py: K >= 248), and enough work to pay for
# the split pass; 128 x 128 tiles where they fill the GPU, 64 x 64 where those would leave
# half the SMs idle, and for the float32-accurate products (three pieces) none where even
# those would: the kernel does not split K, the fma kernel does. A product of one piece
# keeps them: its K steps are a sixth of the work (docs/performance.md).
TENSOR_TILES = {
    "wide": TensorTile(128, 128, 16, 64, 32),
    "narrow": TensorTile(128, 64, 16, 64, 32),
    "small": TensorTile(64, 64, 16, 32, 32),
}
TENSOR_TILE = TENSOR_TILES["wide"]
MIN_TENSOR_K = 256
MIN_TENSOR_WORK = 1 << 30         # multiply-adds


ONE_PIECE_BK = 64   # a one-piece (bfloat16-rounded) product's K step: a third of the pieces
                    # fit three times the depth in the same shared memory, and each step's
                    # barriers serve three times the tensor-core work


# A one-piece product reads a third of the words a K step, so the wide tile's warps take
# 64 x 64 outputs each: each block read from shared memory feeds four products, not two or
# three (H100, bfloat16 8192^3: 246-251 TFLOP/s against 225-231 with 64 x 32 a warp in K
# steps of 64; bench/RESULTS.md).
ONE_PIECE_TILES = {TENSOR_TILES["wide"]: TensorTile(128, 128, 32, 64, 64)}


# A float32-accurate product runs on two float16 pieces of each operand (matmul_f16x3.comp,
# the same kernel's body): two thirds of the bfloat16 pieces' words a K step, so the wide
# tile's warps take 64 x 64 outputs as a one-piece product's do (H100, 8192^3, a prototype
# without the scales: 12.5 ms against 13.0 with 64 x 32 a warp; as it ships, 0.59-0.77 of
# cuBLAS float32's time; bench/RESULTS.md).
HALVES_SHADER = "matmul_f16x3"
HALVES_TILES = {TENSOR_TILES["wide"]: TensorTile(128, 128, 16, 64, 64)}


def halves(tile: TensorTile, shared: int) -> TensorTile:
    """``tile`` for a float32-accurate product of two float16 pieces: its HALVES_TILES entry
    where the shared memory takes it, else as it is."""
    own = HALVES_TILES.get(tile)
    return own if own is not None and own.fits(shared, 1 << 30, 2) else tile


def one_piece(tile: TensorTile, shared: int) -> TensorTile:
    """``tile`` for a product of one piece of each operand: its ONE_PIECE_TILES entry where
    the shared memory takes it, else as deep a K step as it takes, up to ONE_PIECE_BK."""
    own = ONE_PIECE_TILES.get(tile)
    if own is not None and own.fits(shared, 1 << 30, 1):
        return own
    bk = ONE_PIECE_BK
    while bk > tile.bk and tile._replace(bk=bk).pieces_bytes(1) > shared:
        bk //= 2
    return tile._replace(bk=max(bk, tile.bk))


def tensor_tile(shared: int, threads: int) -> TensorTile | None:
    """The first tensor tile a device with these limits can run."""
    return next((t for t in TENSOR_TILES.values() if t.fits(shared, threads)), None)


class MatmulPlan(NamedTuple):
    tile: Tile | TensorTile       # its ``shader`` runs the product
    splits: int                   # K is cut into this many slices of kc, summed afterwards
    kc: int


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_k(tile: Tile, m: int, n: int, k: int, batch: int) -> MatmulPlan:
    """Cut K in slices (multiples of the tile's K step) until the grid fills the GPU."""
    groups = _cdiv(m, tile.bm) * _cdiv(n, tile.bn) * batch
    splits = 1
    while (groups * splits < BUSY_GROUPS and k >= SPLIT_FROM_K
           and k >= 2 * splits * MIN_SPLIT_K):
        splits *= 2
    return sliced(tile, k, splits)


def sliced(tile: Tile, k: int, splits: int) -> MatmulPlan:
    """K cut in about ``splits`` slices, each a whole number of the tile's K steps."""
    kc = max(tile.bk, _cdiv(_cdiv(k, splits), tile.bk) * tile.bk)
    return MatmulPlan(tile, max(1, _cdiv(k, kc)), kc)


@functools.lru_cache(maxsize=4096)     # called on every dispatch
def matmul_plan(m: int, n: int, k: int, batch: int, shared: int = 48 << 10,
                threads: int = 1024, tensor_cores: bool = False,
                pieces: int = 3) -> MatmulPlan:
    """The tile and split for C (m x n) = A (m x k) @ B (k x n), batch times, on a device
    with ``shared`` bytes of shared memory and ``threads`` invocations per workgroup, and
    bfloat16 tensor cores if ``tensor_cores``; ``pieces``, the bfloat16 pieces of each
    operand a tensor-core product would multiply (3: float32-accurate)."""
    def groups(tile):
        return _cdiv(m, tile.bm) * _cdiv(n, tile.bn) * batch
    if (tensor_cores and m % 16 == 0 and n % 16 == 0 and k >= MIN_TENSOR_K
            and m * n * k * batch >= MIN_TENSOR_WORK):
        tile, small = tensor_tile(shared, threads), TENSOR_TILES["small"]
        if tile is not None:
            if 2 * groups(tile) <= BUSY_GROUPS and small.fits(shared, threads):
                tile = small
            if groups(tile) >= BUSY_GROUPS or pieces == 1:
                return MatmulPlan(tile, 1, k)
    wide, square, deep = TILES["wide"], TILES["square"], TILES["deep"]
    deep_fits = k >= MIN_DEEP_K and k % deep.bk == 0 and deep.fits(shared, threads)
    if m <= 16:
        tile = TILES["rows"]
    elif n <= 16:
        tile = TILES["cols"]
    elif (groups(wide) >= WIDE_GROUPS and wide.fits(shared, threads)
          and _cdiv(n, wide.bn) * wide.bn == _cdiv(n, square.bn) * square.bn):
        tile = wide                       # (only where its columns pad N no more than 128's)
    elif (groups(square) >= (SQUARE_OVER_DEEP if deep_fits else
                             SQUARE_GROUPS if k >= SPLIT_FROM_K else BUSY_GROUPS)
          and square.fits(shared, threads)):
        tile = square                     # (a split fills the rest of the GPU if K allows)
    elif deep_fits:
        tile = deep
    else:
        tile = TILES["medium"]
    return split_k(tile, m, n, k, batch)


# Reductions ------------------------------------------------------------------------------
BUSY_ITEM_GROUPS = 1024           # workgroups a pass aims for when a workgroup runs an item
BUSY_ITEM_THREADS = 1 << 17       # threads a pass aims for when a thread runs an item
MIN_GROUP_RUN = 8 * WG            # the fewest elements a workgroup item sums
MIN_THREAD_RUN = 32               # the fewest elements a thread item sums
# The most elements a workgroup's variance item walks. Each thread takes m = VAR_RUN / WG
# of them about one of its own, summing squares of at most (m + 1) times their M2: within
# the tolerance's gamma(n + 3) bound while (m + 3)(m + 1) <= n + 3, which m <= 64 keeps
# for any n (n >= the run's 256 m). As long as a sum's runs: a variance takes its plan.
VAR_RUN = 16 * WG * 4


class ReducePlan(NamedTuple):
    group_items: bool             # one workgroup per item (else one thread per item)
    splits: int                   # items per output element
    chunk: int                    # reduced elements per item (a multiple of 4)


@functools.lru_cache(maxsize=4096)     # called on every dispatch
def reduce_plan(n_out: int, count: int, contiguous: bool) -> ReducePlan:
    """How to reduce ``count`` elements into each of ``n_out`` outputs; ``contiguous``:
    each output's elements are one contiguous run of the input."""
    group = contiguous and count >= WG
    if group:
        splits = min(_cdiv(BUSY_ITEM_GROUPS, n_out), count // MIN_GROUP_RUN)
    else:
        splits = min(_cdiv(BUSY_ITEM_THREADS, n_out), count // MIN_THREAD_RUN)
    chunk = max(4, _cdiv(_cdiv(count, max(1, splits)), 4) * 4)
    return ReducePlan(group, max(1, _cdiv(count, chunk)), chunk)


@functools.lru_cache(maxsize=4096)     # called on every dispatch
def reduce_layout(shape4: tuple, reduced: frozenset) -> int | None:
    """When the reduced axes (a frozenset) of a 4-D shape form one block (size-1 axes
    aside), the input is [outer][count][inner]: return inner, the product of the kept axes
    after the block. None when kept axes sit between reduced ones."""
    kinds = [d in reduced for d in range(4) if shape4[d] != 1]
    block = [i for i, r in enumerate(kinds) if r]
    if block and block[-1] - block[0] + 1 != len(block):
        return None
    inner = 1
    for d in range(3, -1, -1):
        if d in reduced and shape4[d] != 1:
            break
        inner *= int(shape4[d])
    return inner if block else 1
