"""Products on tensor cores (matmul_f16x3.comp for float32, matmul_bf16x6.comp for
autocast): the splits the kernels rely on, when the planner chooses them, how the device
feature is asked for, and (on a device that has tensor cores) the kernels against the cpu
reference and the fma kernel."""
import types

import ml_dtypes
import numpy as np
import pytest

from dualgrad import testing
from dualgrad.api import device
from dualgrad.errors import InvalidValueError
from dualgrad.backend import Epilogue
from dualgrad.gpu import dispatch, features, plans
from dualgrad.gpu.kernels import matmul

U = 2.0 ** -24


# -- the split, as arithmetic ------------------------------------------------------------------
def bf16(x, nearest=True):
    """float32 x rounded to bfloat16 (to nearest even, or toward zero), as float32."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    if nearest:
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
    return (bits & 0xFFFF0000).astype(np.uint32).view(np.float32)


def split(x, nearest=True):
    x0 = bf16(x, nearest)
    r = (x - x0).astype(np.float32)
    x1 = bf16(r, nearest)
    return x0, x1, (r - x1).astype(np.float32)


def splittable_values(rng, n):
    """float32 values the kernel splits (|x| in [2^-100, 2^63), or 0), over every binade."""
    mags = np.exp2(rng.uniform(-100, 62, n))
    vals = (rng.choice([-1.0, 1.0], n) * mags * (1 + rng.random(n))).astype(np.float32)
    vals[:8] = [0.0, -0.0, 1.0, -1.0, 2.0 ** -100, 2.0 ** 63 * (1 - 2 ** -24), 3.0, 1 / 3]
    return vals


@pytest.mark.parametrize("nearest", [True, False], ids=["to-nearest", "toward-zero"])
def test_three_bfloat16_pieces_hold_a_float32_exactly(rng, nearest):
    x = splittable_values(rng, 200_000)
    x0, x1, x2 = split(x, nearest)
    assert np.array_equal(bf16(x2, nearest), x2)               # the last piece is a bfloat16
    total = x0.astype(np.float64) + x1.astype(np.float64) + x2.astype(np.float64)
    assert np.array_equal(total, x.astype(np.float64))


@pytest.mark.parametrize("nearest", [True, False], ids=["to-nearest", "toward-zero"])
def test_the_dropped_piece_products_are_below_2_to_the_minus_20(rng, nearest):
    a, b = splittable_values(rng, 200_000), rng.permutation(splittable_values(rng, 200_000))
    a0, a1, a2 = (p.astype(np.float64) for p in split(a, nearest))
    b0, b1, b2 = (p.astype(np.float64) for p in split(b, nearest))
    dropped = np.abs(a1 * b2) + np.abs(a2 * b1) + np.abs(a2 * b2)
    ab = np.abs(a.astype(np.float64) * b.astype(np.float64))
    assert np.all(dropped <= 2.0 ** -20 * ab)                  # 16u, the table's allowance
    kept = a0 * b0 + a1 * b0 + a0 * b1 + a1 * b1 + a2 * b0 + a0 * b2
    assert np.all(np.abs(kept - a.astype(np.float64) * b) <= 2.0 ** -20 * ab)


# -- the float16 split (split_f16.comp), as arithmetic -----------------------------------------
def scale_exponents(x, axis):
    """split_f16.comp's s per row: 2^s takes the largest finite |x| along ``axis`` into
    [2^14, 2^15) (a subnormal or zero largest as 2^-126)."""
    top = np.where(np.isfinite(x), np.abs(x), 0).astype(np.float32).max(axis=axis, initial=0)
    return 141 - np.maximum(top.view(np.uint32).astype(np.int64) >> 23, 1)


def halves(x, s):
    """(x0, x1) as float64: x 2^s split into float16 pieces, nearest even (x finite)."""
    y = np.float32(x) * np.float32(2.0) ** np.minimum(s, 127) * np.float32(2.0) ** np.maximum(
        s - 127, 0)
    y = np.asarray(y, np.float32)
    x0 = y.astype(np.float16)
    x1 = (y - x0.astype(np.float32)).astype(np.float16)
    return x0.astype(np.float64), x1.astype(np.float64)


def wide_rows(rng, rows, k):
    """Rows of float32 values whose magnitudes span up to 2^60 within a row (so some fall
    below float16's subnormal step once scaled), zeros and a few all-tiny rows."""
    spread = rng.uniform(0, 60, (rows, 1))
    x = rng.choice([-1.0, 1.0], (rows, k)) * np.exp2(rng.uniform(-30, 30, (rows, 1))
                                                       - spread * rng.random((rows, k)))
    x[rng.random((rows, k)) < 0.05] = 0.0
    x[:2] *= 2.0 ** -90
    return x.astype(np.float32)


def test_two_float16_pieces_hold_a_scaled_float32_within_the_bound(rng):
    x = wide_rows(rng, 400, 300)
    s = scale_exponents(x, 1)[:, None]
    y = x.astype(np.float64) * np.exp2(s.astype(np.float64))
    top = np.abs(y).max(axis=1)
    assert np.all((top >= 2.0 ** 14) & (top < 2.0 ** 15))
    x0, x1 = halves(x, s)
    assert np.all(np.abs(y - x0 - x1) <= 2.0 ** -22 * np.abs(y) + 2.0 ** -25)
    assert np.all(np.isfinite(x0)) and np.all(np.abs(x0) <= 2.0 ** 15)


def test_the_dropped_float16_piece_products_are_within_the_floor_bound(rng):
    """Per term: |a b - (a0 b1 + a1 b0 + a0 b0) / 2^(sa + sb)| <= 12u |a b| + 2^-38 (max|a| |b|
    + |a| max|b|), the maxima over the row of op(A) and the column of op(B)."""
    a, b = wide_rows(rng, 300, 256), wide_rows(rng, 300, 256)    # row i of a meets row i of b
    sa, sb = scale_exponents(a, 1)[:, None], scale_exponents(b, 1)[:, None]
    a0, a1 = halves(a, sa)
    b0, b1 = halves(b, sb)
    kept = (a0 * b1 + a1 * b0 + a0 * b0) * np.exp2(-(sa + sb).astype(np.float64))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    top_a, top_b = np.abs(a64).max(axis=1, keepdims=True), np.abs(b64).max(axis=1, keepdims=True)
    bound = 12 * U * np.abs(a64 * b64) + 2.0 ** -38 * (top_a * np.abs(b64) + np.abs(a64) * top_b)
    assert np.all(np.abs(kept - a64 * b64) <= bound)
    # ... which the "matmul" bound covers through product_scale's floor term from K = 256
    assert 2 * testing.gamma(plans.MIN_TENSOR_K) * testing.tolerances.FLOOR_WEIGHT >= 2.0 ** -38


def float16_pieces_product(a, b):
    """op(A) @ op(B) as matmul_f16x3.comp computes it (2-D, finite), its tensor cores' sums
    of a 16-deep step's three piece products taken as float64 rounded once to float32: the
    scaled split, the steps added in float32, the scales divided out."""
    sa, sb = scale_exponents(a, 1)[:, None], scale_exponents(b, 0)[None, :]
    a0, a1 = halves(a, sa)
    b0, b1 = halves(b, sb)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(0, a.shape[1], 16):
        s = slice(k, k + 16)
        step = a1[:, s] @ b0[s] + a0[:, s] @ b1[s] + a0[:, s] @ b0[s]
        acc = (acc + step.astype(np.float32)).astype(np.float32)
    return (acc * np.exp2(-(sa + sb).astype(np.float64))).astype(np.float32)


@pytest.mark.parametrize("value", [1e-35, -2.0 ** 70, 2.0 ** 63, 3e30])
def test_the_float16_pieces_product_agrees_with_the_cpu_within_matmul_s_bound(rng, value):
    """The kernel's arithmetic, modelled, on the matmul:tensor check's kind of operands (a
    value far from the others in some rows and columns, zeros beside it): within the
    "matmul" entry of the cpu's product, S = product_scale."""
    a = rng.uniform(-3.0, 3.0, (48, 320)).astype(np.float32)
    b = rng.uniform(-3.0, 3.0, (320, 32)).astype(np.float32)
    a[3, 7] = a[20, 100] = value
    b[7, 5] = value
    b[100, :] = 0.0                  # its product with a[20, 100] vanishes from |A| @ |B|
    with np.errstate(over="ignore"):          # (2^70 squared: inf in both)
        got = float16_pieces_product(a, b)
        ref = a @ b
    result = testing.agreement("matmul", got, ref, scale=testing.product_scale(a, b),
                               length=320)
    assert result.ok, result


def test_the_float16_bound_holds_from_k_128_with_no_guard_bits():
    """(3c + 12 + K/16) u <= gamma(K) with c = 36 once K >= 128, within the planner's 256."""
    def ours(k):
        return (3 * 36 + 12 + k / 16) * U
    assert ours(plans.MIN_TENSOR_K) <= testing.gamma(plans.MIN_TENSOR_K)
    assert ours(128) <= testing.gamma(128) and ours(127) > testing.gamma(127)


def test_the_bound_holds_from_k_248_with_no_guard_bits():
    """(6c + 16 + K/16) u <= gamma(K) with c = 36 once K >= 248, which is why the planner
    asks for K >= 256."""
    def ours(k):
        return (6 * 36 + 16 + k / 16) * U
    assert ours(plans.MIN_TENSOR_K) <= testing.gamma(plans.MIN_TENSOR_K)
    assert ours(248) <= testing.gamma(248) and ours(247) > testing.gamma(247)


# -- the plan ----------------------------------------------------------------------------------
def test_the_planner_takes_tensor_cores_only_for_big_whole_block_products():
    big = (2048, 1024, 1024, 1)                   # 2^31 multiply-adds
    wide, narrow = plans.TENSOR_TILES["wide"], plans.TENSOR_TILES["narrow"]
    assert plans.matmul_plan(*big, tensor_cores=True).tile == wide == plans.TENSOR_TILE
    assert plans.matmul_plan(*big, tensor_cores=False).tile.shader == "matmul"
    for m, n, k, batch in [(2048, 1000, 1024, 1),    # N not whole 16-blocks
                           (2040, 1024, 1024, 1),    # M neither
                           (8192, 8192, 128, 1),     # K below the bound's 248
                           (512, 1024, 1024, 1)]:    # too little work to pay
        assert plans.matmul_plan(m, n, k, batch, tensor_cores=True).tile.shader == "matmul"
    plan = plans.matmul_plan(4096, 4096, 300, 1, tensor_cores=True)
    assert (plan.tile, plan.splits) == (wide, 1)      # never split K
    # Where 128 x 128 tiles would leave half the SMs idle (1024^3: 64 of them), 64 x 64.
    small = plans.TENSOR_TILES["small"]
    assert plans.matmul_plan(1024, 1024, 1024, 1, tensor_cores=True) == (small, 1, 1024)
    assert plans.matmul_plan(1024, 1024, 1024, 2, tensor_cores=True).tile == wide
    # Where even 64 x 64 tiles make fewer workgroups than BUSY_GROUPS (a GPT feed-forward's
    # g^T x: 2^30 multiply-adds in 64 tiles of K 4096), the fma kernel, which splits K;
    # a product of one piece (bfloat16) keeps the tensor cores.
    assert plans.matmul_plan(1024, 256, 4096, 1, tensor_cores=True)[:2] == (
        plans.TILES["deep"], 4)
    assert plans.matmul_plan(1024, 256, 4096, 2, tensor_cores=True).tile == small
    assert plans.matmul_plan(1024, 256, 4096, 1, tensor_cores=True, pieces=1) == (
        small, 1, 4096)
    # The narrow tile where only it fits (128 threads a workgroup at most).
    assert not wide.fits(threads=128) and narrow.fits(threads=128)
    assert plans.matmul_plan(*big, 48 << 10, 128, True).tile == narrow
    # Shared memory that holds no tensor tile (under 13.5 KiB; Vulkan guarantees 16): fma.
    assert plans.matmul_plan(*big, 12 << 10, 1024, True).tile.shader == "matmul"
    assert plans.matmul_plan(*big, 16 << 10, 1024, True).tile == small


def test_a_tensor_recipe_names_its_shader_and_constants():
    # C (1024 x 768) = A (1024 x 3072) @ B^T, B stored (768 x 3072): 2^31.2 multiply-adds
    r = matmul.matmul_recipe((1024, 3072), (768, 3072), False, True, (1024, 768, 3072, 1),
                             (48 << 10, 1024, True), plans.matmul_plan)
    t = plans.matmul_plan(1024, 768, 3072, 1, tensor_cores=True).tile
    h = plans.halves(t, 48 << 10)       # (the small tile, as it is: 96 workgroups)
    assert t == h == plans.TENSOR_TILES["small"]
    assert plans.halves(plans.TENSOR_TILE, 48 << 10) == plans.TensorTile(128, 128, 16, 64, 64)
    assert plans.halves(plans.TENSOR_TILE, 16 << 10) == plans.TENSOR_TILE    # (17 KiB)
    assert r.shader == "matmul_f16x3" and r.partials is None
    assert r.spec == (*h, h.threads, 2, 0, 0, 0, 0)     # (2 float16 pieces: float32 accuracy)
    # ... which applies a linear layer's bias and relu, or the relu's mask, itself
    for kind, flags in (((True, True, False, True), (1, 1, 0)),
                        ((False, False, True, False), (0, 0, 1))):
        fused = matmul.matmul_recipe((1024, 3072), (768, 3072), False, True,
                                     (1024, 768, 3072, 1), (48 << 10, 1024, True),
                                     plans.matmul_plan, kind)
        assert fused.spec == (*h, h.threads, 2, 0, *flags)
    assert r.groups == (768 // h.bn, 1024 // h.bm, 1)
    # A (m x k, k contiguous) is transposed into k-major pieces by blocks of 64 x 32; B^T
    # stored (n x k) too, both in one pass: a workgroup a block, A's first, then B's; each
    # row of op(A) and column of op(B) gets a scale.
    s = r.split
    blocks_a, blocks_b = 1024 // 64 * 3072 // 32, 768 // 64 * 3072 // 32
    assert s.spec == (1, 1) and s.rows == (1024, 768)
    assert s.uints == (1024, 3072, 1024 * 3072, blocks_a, 768, 3072, 768 * 3072, blocks_b)
    assert s.groups == (blocks_a + blocks_b, 1, 1)
    assert s.floats == (1024 * 3072, 768 * 3072)
    # The maxima dispatch walks them with its own grid: 8 runs of 512 k a workgroup.
    runs_a, runs_b = 1024 * 6 // 8, 768 * 6 // 8
    assert s.maxima_groups == (runs_a + runs_b, 1, 1)
    assert s.maxima_tail == dispatch.packed_uints(
        (1024, 3072, 1024 * 3072, runs_a, 768, 3072, 768 * 3072, runs_b))
    # ... and a k-major operand ([batch][k][r]: 2 x 600 x 4096) by 256 rows by 128 k.
    kmajor, *_ = matmul.split_pass((2, 600, 4096), True, (2, 600, 4096), True, halves=True)
    assert kmajor.maxima_groups == (2 * (2 * 16 * 5), 1, 1) and kmajor.groups[0] > 1000
    # ... and the kernel told each one's plane and batch stride (0: no batch).
    assert r.uints[-4:] == (1024 * 3072, 0, 768 * 3072, 0)
    # float16 autocast's product of three bfloat16 pieces of the rounded operands
    f16 = matmul.matmul_recipe((1024, 3072), (768, 3072), False, True, (1024, 768, 3072, 1),
                               (48 << 10, 1024, True), plans.matmul_plan, pieces=3, round16=1)
    assert f16.shader == "matmul_bf16x6" and f16.spec == (*t, t.threads, 3, 1, 0, 0, 0)
    assert f16.split.spec == (1, 1, 3, 1) and f16.split.rows == ()
    assert f16.split.floats == (3 * 1024 * 3072 // 2, 3 * 768 * 3072 // 2)
    # Under bfloat16 autocast: one piece each (x rounded), a third of the pieces' memory,
    # and K steps as deep as the shared memory takes.
    one = matmul.matmul_recipe((1024, 3072), (768, 3072), False, True, (1024, 768, 3072, 1),
                               (48 << 10, 1024, True), plans.matmul_plan, pieces=1)
    deep = plans.one_piece(t, 48 << 10)
    assert deep.bk == plans.ONE_PIECE_BK and 2 * 2 * deep.bk * (t.bm + t.bn + 16) <= 48 << 10
    assert one.spec == (*deep, t.threads, 1, 0, 0, 0, 0) and one.split.spec == (1, 1, 1, 0)
    assert one.groups == r.groups
    assert one.split.floats == (1024 * 3072 // 2, 768 * 3072 // 2)
    # A stored in bfloat16 (+ 4), C too (+ 16): the split pass widens A, the kernel stores
    # C with the bias and the relu (which a float32 C of bfloat16 pieces leaves to separate
    # ops), never the mask.
    kind = (True, True, True, False)
    c16 = matmul.matmul_recipe((1024, 3072), (768, 3072), False, True, (1024, 768, 3072, 1),
                               (48 << 10, 1024, True), plans.matmul_plan, kind, 1, 2 + 4 + 16)
    assert c16.spec == (*deep, t.threads, 1, 22, 1, 1, 0) and c16.split.spec == (1, 1, 1, 6)
    wide = matmul.matmul_recipe((1024, 3072), (768, 3072), False, True, (1024, 768, 3072, 1),
                                (48 << 10, 1024, True), plans.matmul_plan, kind, 1, 2 + 4)
    assert wide.spec[-4:] == (6, 0, 0, 0)


def test_a_one_piece_product_takes_warps_of_64_x_64_on_the_wide_tile():
    """A third of the words a K step leaves room for larger warp shares (four products
    a block read from shared memory); where the shared memory does not take that tile, the
    plan's tile with as deep a K step as fits."""
    wide = plans.TENSOR_TILES["wide"]
    own = plans.one_piece(wide, 48 << 10)
    assert (own.bm, own.bn, own.wm, own.wn, own.bk) == (wide.bm, wide.bn, 64, 64, 32)
    assert own.fits(48 << 10, 128, pieces=1) and not own.fits(48 << 10, 128)
    assert own.pieces_bytes(1) == 17 << 10 and plans.one_piece(wide, 17 << 10) == own
    assert plans.one_piece(wide, 16 << 10) == wide              # (K steps of 16: 8.5 KiB)
    small = plans.TENSOR_TILES["small"]
    assert plans.one_piece(small, 48 << 10) == small._replace(bk=plans.ONE_PIECE_BK)


def test_split_passes_follow_batches_and_keep_k_major_operands_as_they_are():
    # A batch of 3 A^T stored (3, 300, 144): k-major already, split as it is, its words
    # walked along x; B (96 x 300) stored as B^T, shared by the batch: transposed once.
    r = matmul.matmul_recipe((3, 300, 144), (96, 300), True, True, (144, 96, 300, 3),
                             (48 << 10, 1024, True), forced(plans.TENSOR_TILE))
    s, layout = r.split, r.uints[-4:]
    words = -(-3 * 300 * 144 // (8 * dispatch.WG))      # workgroups of 256 words
    assert s.spec == (0, 1)
    assert s.uints == (144, 300, 3 * 300 * 144, words, 96, 300, 300 * 96, 2 * 10)
    assert s.groups == (words + 2 * 10, 1, 1)
    assert layout == (3 * 300 * 144, 300 * 144, 300 * 96, 0)
    assert s.floats == (3 * 300 * 144, 300 * 96)          # two float16 pieces each
    assert s.rows == (3 * 144, 96)                        # a scale a row of each matrix


def test_an_operands_workgroups_leave_room_for_the_others():
    # 2^27 words; 2^18 blocks of 64 x 32 (R = 2^24, K = 32): each walked by half the grid
    for shape, k_major in (((1 << 14, 1 << 16), True), ((1 << 24, 32), False)):
        assert matmul.operand_split(shape, k_major)[1][3] == dispatch.MAX_GROUPS // 2


def test_tensor_tiles_check_their_shape_and_limits():
    assert plans.TENSOR_TILE.fits() and plans.TENSOR_TILE.threads == 256
    assert not plans.TensorTile(128, 128, 8, 64, 32).fits()      # K step not 16-deep
    assert not plans.TensorTile(128, 128, 16, 48, 32).fits()     # warp share not 16-blocks
    assert not plans.TensorTile(256, 256, 16, 64, 32).fits()     # over 48 KiB of tiles
    assert not plans.TENSOR_TILE.fits(threads=128)


# -- the device feature ------------------------------------------------------------------------
def test_forcing_tensor_cores_takes_a_tile_the_device_can_run():
    natural = plans.matmul_plan
    device_with = types.SimpleNamespace(ctx=types.SimpleNamespace(tensor_cores=True))
    with testing.tensor_cores_forced(device_with) as used:
        assert used
        assert plans.matmul_plan(32, 48, 300, 1, 48 << 10, 1024, True).tile == \
            plans.TENSOR_TILE                                  # however small the product
        assert plans.matmul_plan(32, 48, 300, 1, 48 << 10, 128, True).tile == \
            plans.TENSOR_TILES["narrow"]
        assert plans.matmul_plan(32, 48, 300, 1, 12 << 10, 1024, True).tile.shader == \
            "matmul"                                           # no tensor tile fits
        assert plans.matmul_plan(30, 48, 300, 1).tile.shader == "matmul"
    assert plans.matmul_plan is natural
    device_without = types.SimpleNamespace(ctx=types.SimpleNamespace(tensor_cores=False))
    with testing.tensor_cores_forced(device_without) as used:
        assert not used and plans.matmul_plan is natural


def test_the_environment_switch_is_checked(monkeypatch):
    for value, allowed in (("", True), ("1", True), ("0", False)):
        monkeypatch.setenv(features.ENV, value)
        assert features.requested() is allowed
    monkeypatch.setenv(features.ENV, "yes")
    with pytest.raises(InvalidValueError, match=features.ENV):
        features.requested()


def test_the_device_chain_enables_every_feature_the_shader_declares():
    vulkan = pytest.importorskip("vulkan")       # its cffi types (the loader must be there)
    head = vulkan.VkPhysicalDeviceBufferDeviceAddressFeatures(bufferDeviceAddress=1)
    extensions, top, keep = features.device_chain(vulkan, head)
    assert set(extensions) == set(features.EXTENSIONS)
    ffi = vulkan.ffi
    node = ffi.cast("VkBaseOutStructure*", ffi.addressof(top))
    seen = []
    while node != ffi.NULL:
        seen.append(node.sType)
        if node.sType == features._BF16_FEATURES:
            words = ffi.cast("uint32_t*", node)
            assert words[features._BF16_TYPE] == words[features._BF16_COOPMAT] == 1
        node = node.pNext
    assert seen == [vulkan.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
                    vulkan.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
                    vulkan.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
                    features._BF16_FEATURES,
                    vulkan.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES]
    assert top.shaderFloat16 and len(keep) == 5


# -- the split pass (split_bf16.comp: integer arithmetic, so it runs on every device) -----------
# (2^64 - 2^40: its first piece rounds to 2^64, whose square overflows float32.)
UNSPLITTABLE = [np.inf, -np.inf, np.nan, 2.0 ** 63, 2.0 ** 64 - 2.0 ** 40, -2.0 ** 70, 1e-35,
                -2.0 ** -101]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,k_major", [((37, 24), True), ((24, 37), False),
                                           ((2, 16, 70), False), ((2, 5, 40), True),
                                           ((8, 1), False), ((2, 136, 70), False),
                                           ((2, 40, 64), True)], ids=str)
@pytest.mark.parametrize("cap", [None, 2], ids=["whole grid", "one group an operand"])
def test_the_split_pass_writes_k_major_pieces_of_every_value(gpu, rng, monkeypatch, shape,
                                                             k_major, cap):
    """Three planes of bfloat16 values, [batch][k][r] whichever way an operand is stored;
    a value the split cannot represent becomes (NaN, 0, 0). A product's two operands go
    through one pass: here the case's and a partner stored the other way. With the grid
    capped (as it is at 65535 workgroups a dimension), the workgroups walk what is left."""
    if cap:
        monkeypatch.setattr(matmul, "MAX_GROUPS", cap)
    backend = device.active()
    operands = [(shape, k_major), ((2, 24, 40), not k_major)]
    xs = [_with_unsplittable(rng, s) for s, _ in operands]
    split_pass, *layouts = matmul.split_pass(*operands[0], *operands[1])
    if cap:
        assert split_pass.groups == (2, 1, 1)
    h0, h1 = (backend.upload(x) for x in xs)
    out = backend.empty((sum(split_pass.floats),))
    b_pieces = out.address + 4 * split_pass.floats[0]
    backend.device.launch("split_bf16", split_pass.spec,
                          dispatch.push_constants((h0.address, out.address, h1.address,
                                                   b_pieces), split_pass.uints),
                          split_pass.groups, [h0, h1], [out])
    got = backend.download(out).view(np.uint16)
    cut = 2 * split_pass.floats[0]                   # A's pieces, in bfloat16 values
    for x, (_, km), (plane, _), part in zip(xs, operands, layouts, (got[:cut], got[cut:])):
        assert np.array_equal(part.reshape((3, plane)), _pieces(x, km))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,k_major", [((37, 24), True), ((24, 37), False),
                                           ((2, 16, 70), False), ((2, 5, 40), True),
                                           ((8, 1), False), ((2, 136, 600), False),
                                           ((2, 700, 64), True), ((2, 300, 600), True)],
                         ids=str)
@pytest.mark.parametrize("cap", [None, 2], ids=["whole grid", "one group an operand"])
def test_the_float16_split_pass_scales_each_row_and_writes_two_pieces(gpu, rng, monkeypatch,
                                                                       shape, k_major, cap):
    """split_f16.comp's two dispatches: each row's largest finite |x| (into zeroed
    scales), then two planes of float16 values, [batch][k][r] whichever way an operand is
    stored, of x scaled by its row's power of two; inf and NaN become (NaN, 0)."""
    if cap:
        monkeypatch.setattr(matmul, "MAX_GROUPS", cap)
    backend = device.active()
    operands = [(shape, k_major), ((2, 24, 40), not k_major)]
    xs = []
    for s_, km in operands:
        rows, k = (s_[-1], s_[-2]) if km else (s_[-2], s_[-1])
        batch = s_[0] if len(s_) == 3 else 1
        x = wide_rows(rng, batch * rows, k).reshape(batch, rows, k)     # [b][r][k]
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, min(flat.size, 3), replace=False)] = [np.inf, -np.inf,
                                                                       np.nan][:min(flat.size, 3)]
        stored = np.swapaxes(x, -1, -2) if km else x
        xs.append(np.ascontiguousarray(stored).reshape(s_))
    split_pass, *layouts = matmul.split_pass(*operands[0], *operands[1], halves=True)
    h0, h1 = (backend.upload(x) for x in xs)
    out = backend.empty((sum(split_pass.floats),))
    scales = backend.empty((sum(split_pass.rows),), np.dtype(np.int32))
    backend.fill(scales, 0)
    addresses = (h0.address, out.address, h1.address, out.address + 4 * split_pass.floats[0])
    scale_addresses = dispatch.push_constants(
        (scales.address, scales.address + 4 * split_pass.rows[0]))
    backend.device.launch("split_f16", split_pass.spec + (1,), dispatch.push_constants(
        addresses) + split_pass.maxima_tail + scale_addresses, split_pass.maxima_groups,
        [h0, h1], [scales])
    backend.device.launch("split_f16", split_pass.spec + (0,), dispatch.push_constants(
        addresses, split_pass.uints) + scale_addresses, split_pass.groups, [h0, h1, scales],
        [out])
    got = backend.download(out).view(np.uint16)
    got_scales = backend.download(scales)
    cut, cut_rows = 2 * split_pass.floats[0], split_pass.rows[0]
    for x, (_, km), (plane, _), part, maxima in zip(
            xs, operands, layouts, (got[:cut], got[cut:]),
            (got_scales[:cut_rows], got_scales[cut_rows:])):
        kr = x if km else np.swapaxes(x, -1, -2)
        kr = kr.reshape((-1,) + kr.shape[-2:])                          # [b][k][r]
        top = np.where(np.isfinite(kr), np.abs(kr), 0).max(axis=1)     # [b][r]
        assert np.array_equal(maxima, top.astype(np.float32).reshape(-1).view(np.int32))
        s = scale_exponents(kr, 1)[:, None, :]
        bad = ~np.isfinite(kr)
        x0, x1 = halves(np.where(bad, 0, kr), s)
        want = np.stack([x0.astype(np.float16).view(np.uint16),
                         x1.astype(np.float16).view(np.uint16)])
        want[0][bad], want[1][bad] = 0x7E00, 0
        assert np.array_equal(part.reshape((2, plane)), want.reshape(2, plane))


def _with_unsplittable(rng, shape):
    """Splittable values of ``shape`` with the unsplittable ones among them."""
    size = int(np.prod(shape))
    x = splittable_values(rng, max(size, 8))[:size]
    x[rng.choice(size, min(size, len(UNSPLITTABLE)), replace=False)] = \
        UNSPLITTABLE[:min(size, len(UNSPLITTABLE))]
    return x.reshape(shape)


def _pieces(x, k_major, least_bad=len(UNSPLITTABLE)):
    """The three k-major planes of bfloat16 bits the split pass should write for ``x`` (of
    which ``least_bad`` or more are unsplittable)."""
    kr = x if k_major else np.swapaxes(x, -1, -2)
    values = np.ascontiguousarray(kr).reshape(-1)
    bad = ~((np.abs(values) < 2.0 ** 63) & ((np.abs(values) >= 2.0 ** -100) | (values == 0)))
    want = np.stack([piece.view(np.uint32) >> 16 for piece in
                     split(np.where(bad, 0, values).astype(np.float32))]).astype(np.uint16)
    want[0][bad] = 0x7FC0
    want[1:, bad] = 0
    assert bad.sum() >= min(values.size, least_bad)
    return want


@pytest.mark.gpu
@pytest.mark.parametrize("low", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("a_k_major", [True, False], ids=["A k-major", "A transposed"])
def test_the_split_pass_widens_16_bit_operands_and_rounds_float32_ones(gpu, rng, low,
                                                                       a_k_major):
    """With ROUND16's code of a 16-bit type: A, stored in it (+ 4), is split as its values
    widened; B, float32, as its values rounded to that type (to nearest even): the pieces
    of autocast's products, whose operands are that rounding."""
    backend = device.active()
    shapes = [(2, 24, 40), (40, 32)]
    specials = np.array([np.inf, -np.inf, np.nan, 65504.0, 65520.0, 2.0 ** -24, 2.0 ** -25,
                         -0.0, 1 / 3, 1e-30], np.float32)
    xs = []
    for shape in shapes:
        x = (rng.standard_normal(shape) * 300).astype(np.float32).reshape(-1)
        x[rng.choice(x.size, specials.size, replace=False)] = specials
        xs.append(x.reshape(shape))
    with np.errstate(over="ignore"):                # (65520 and inf: float16's inf)
        stored, wide = xs[0].astype(low), xs[1]
        taken = [stored.astype(np.float32), wide.astype(low).astype(np.float32)]
    assert not np.array_equal(taken[1], wide, equal_nan=True)       # (rounded as read)
    code = dispatch.ROUND16[np.dtype(low)]
    split_pass, *layouts = matmul.split_pass(shapes[0], a_k_major, shapes[1], not a_k_major,
                                             3, code + 4)
    h0, h1 = backend.upload(stored), backend.upload(wide)
    assert h0.dtype == np.dtype(low)
    out = backend.empty((sum(split_pass.floats),))
    backend.device.launch("split_bf16", split_pass.spec,
                          dispatch.push_constants((h0.address, out.address, h1.address,
                                                   out.address + 4 * split_pass.floats[0]),
                                                  split_pass.uints),
                          split_pass.groups, [h0, h1], [out])
    got = backend.download(out).view(np.uint16)
    cut = 2 * split_pass.floats[0]
    for x, km, (plane, _), part in zip(taken, (a_k_major, not a_k_major), layouts,
                                       (got[:cut], got[cut:])):
        assert np.array_equal(part.reshape((3, plane)), _pieces(x, km, 3))


# -- the kernel, on a device with tensor cores ----------------------------------------------
@pytest.fixture
def tensor_pair(gpu):
    backend = device.active()
    if not backend.ctx.tensor_cores:
        pytest.skip(f"{backend.ctx.name} has no bfloat16 cooperative matrices (tensor cores)")
    return testing.Pair(backend)


def forced(tile):
    return lambda m, n, k, batch, *limits: plans.MatmulPlan(tile, 1, k)


def operands(rng, sa, sb, trans_a, trans_b, lo=-3.0, hi=3.0):
    a = rng.uniform(lo, hi, sa).astype(np.float32)
    b = rng.uniform(lo, hi, sb).astype(np.float32)
    a_st = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans_a else a
    b_st = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
    return a, b, a_st, b_st


def agree(pair, a, b, a_st, b_st, trans_a, trans_b):
    ref, got = pair.twin("matmul", a_st, b_st, trans_a, trans_b)
    result = pair.agree("matmul", got, ref, scale=testing.product_scale(a, b),
                        length=a.shape[-1])
    assert result.ok, result
    return got


TENSOR_TILES = {**plans.TENSOR_TILES,
                "64x128": plans.TensorTile(64, 128, 16, 32, 64),
                "k32": plans.TensorTile(128, 64, 32, 64, 32),
                "warps of 64 x 64": plans.TensorTile(128, 256, 16, 64, 64),
                "one warp": plans.TensorTile(16, 16, 16, 16, 16)}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(TENSOR_TILES))
@pytest.mark.parametrize("k", [264, 263], ids=["K 264", "K 263"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True),
                                             (True, True)])
def test_tensor_tiles_at_their_edges(tensor_pair, rng, monkeypatch, name, k, trans_a,
                                     trans_b):
    tile = TENSOR_TILES[name]
    # One 16-block past a tile in M and N; K a few steps and a part (half a 16-deep step,
    # or an odd part: rows of the transposing split that end inside a quad).
    m, n = tile.bm + 16, tile.bn + 16
    monkeypatch.setattr(plans, "matmul_plan", forced(tile))
    agree(tensor_pair, *operands(rng, (m, k), (k, n), trans_a, trans_b), trans_a, trans_b)


ONE_PIECE_TILES = {"the plan's": plans.TENSOR_TILE,
                   "its one-piece tile": plans.one_piece(plans.TENSOR_TILE, 48 << 10),
                   "K steps of 64": plans.TensorTile(128, 128, 64, 64, 32)}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ONE_PIECE_TILES))
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_bfloat16_products_at_tile_edges(tensor_pair, rng, monkeypatch, name, trans_a,
                                         trans_b):
    """Autocast's bfloat16 product (one piece of each operand) on each tile as it is: one
    16-block past the tile in M and N, K a few of its steps and an odd part."""
    tile = ONE_PIECE_TILES[name]
    monkeypatch.setattr(plans, "matmul_plan", forced(tile))
    monkeypatch.setattr(plans, "ONE_PIECE_TILES", {tile: tile})
    low, k = np.dtype(ml_dtypes.bfloat16), 263
    a, b, a_st, b_st = operands(rng, (tile.bm + 16, k), (k, tile.bn + 16), trans_a, trans_b)
    ref, got = tensor_pair.twin("matmul", a_st, b_st, trans_a, trans_b, None, Epilogue(), low)
    a, b = (x.astype(low).astype(np.float64) for x in (a, b))
    result = tensor_pair.agree("matmul:autocast", got, ref, scale=np.abs(a) @ np.abs(b),
                               length=k)
    assert result.ok, result


@pytest.mark.gpu
@pytest.mark.parametrize("shapes", [((3, 144, 300), (300, 80)), ((2, 160, 260), (2, 260, 96))],
                         ids=str)
def test_batched_tensor_products(tensor_pair, rng, monkeypatch, shapes):
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TENSOR_TILE))
    for trans in (False, True):
        agree(tensor_pair, *operands(rng, *shapes, trans, trans), trans, trans)


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.gpu
@pytest.mark.parametrize("value", [None, np.inf], ids=["finite", "inf in A"])
def test_a_tensor_product_with_a_bias_is_the_product_then_the_addition(tensor_pair, rng,
                                                                      monkeypatch, value):
    """The float16 pieces' kernel adds the bias, applies the relu and then the mask as it
    stores C, on tensor cores and on the exact path an inf sends a tile to: the same bits
    as the product and a separate add, relu and relu's backward by the mask. A's row sums
    come from a reduction after the product, the same bits as a separate one."""
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TENSOR_TILE))
    backend = tensor_pair.dut
    a, b, a_st, b_st = operands(rng, (144, 300), (300, 96), False, True)
    if value is not None:
        a_st[130, 5] = value                        # (rows 128..143's tile: the exact path)
    bias = rng.uniform(-3.0, 3.0, 96).astype(np.float32)
    mask = rng.uniform(-1.0, 1.0, (144, 96)).astype(np.float32)
    ha, hb, hbias, hmask = (backend.upload(x) for x in (a_st, b_st, bias, mask))
    alone = backend.matmul(ha, hb, False, True)
    added = backend.download(backend.binary("add", alone, hbias))
    fused = backend.download(backend.matmul(ha, hb, False, True,
                                            epilogue=Epilogue(bias=hbias)))
    assert np.array_equal(bits(fused), bits(added))
    relu = backend.download(backend.matmul(ha, hb, False, True,
                                           epilogue=Epilogue(bias=hbias, relu=True)))
    assert np.array_equal(bits(relu), bits(np.where(fused <= 0, np.float32(0), fused)))
    assert (relu == 0).any() and (relu > 0).any()
    masked = backend.download(backend.matmul(ha, hb, False, True, epilogue=Epilogue(
        bias=hbias, relu=True, mask=hmask)))
    assert np.array_equal(bits(masked), bits(np.where(mask > 0, relu, np.float32(0))))
    plain = backend.download(alone)
    masked = backend.download(backend.matmul(ha, hb, False, True,
                                             epilogue=Epilogue(mask=hmask)))
    assert np.array_equal(bits(masked), bits(np.where(mask > 0, plain, np.float32(0))))
    assert np.isinf(plain[130]).any() == (value is not None)
    sums = backend.empty((144,), np.dtype(np.float32))
    backend.matmul(ha, hb, False, True, epilogue=Epilogue(row_sums=sums))  # (a reduction's)
    assert np.array_equal(bits(backend.download(sums)),
                          bits(backend.download(backend.reduce("sum", ha, (1,)))))
    if value is None:
        ref, got = tensor_pair.twin("matmul", a_st, b_st, False, True, None,
                                    Epilogue(bias=bias))
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)
        assert tensor_pair.agree("matmul:bias", got, ref, scale=scale, length=300).ok


@pytest.mark.gpu
def test_the_tensor_kernel_errs_less_than_float32_fmas(tensor_pair, rng, monkeypatch):
    """All-positive operands, K = 4096: every rounding goes the same way, the worst case for
    a float32 sum. Against float64, the tensor-core result is closer than the fma kernel's."""
    a, b, a_st, b_st = operands(rng, (512, 4096), (4096, 256), False, False, 0.0, 1.0)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    errors = {}
    for name, tile in (("tensor", plans.TENSOR_TILE), ("fma", plans.TILES["square"])):
        monkeypatch.setattr(plans, "matmul_plan", forced(tile))
        got = agree(tensor_pair, a, b, a_st, b_st, False, False)
        errors[name] = np.max(np.abs(got - exact) / exact) / U
    assert errors["tensor"] < errors["fma"]


@pytest.mark.gpu
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_an_unsplittable_value_sends_its_tile_to_the_exact_path(tensor_pair, rng,
                                                                 monkeypatch, value):
    """The tile that holds it is computed by float32 fmas in k order, bit for bit what the
    fma kernel computes on a tile of the same shape (128 x 128); the others on tensor
    cores, within the bound."""
    a, b, a_st, b_st = operands(rng, (256, 320), (320, 256), False, False)
    a[130, 5] = value                  # in the tile of rows 128..255 (a_st is a itself)
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TENSOR_TILE))
    ref, got = tensor_pair.twin("matmul", a_st, b_st, False, False)
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TILES["square"]))
    _, fma = tensor_pair.twin("matmul", a_st, b_st, False, False)
    assert plans.TILES["square"][:2] == plans.TENSOR_TILE[:2]
    marked = got[128:, :128]
    assert np.array_equal(marked.view(np.uint32), fma[128:, :128].view(np.uint32))
    finite = np.isfinite(ref) & np.isfinite(got)
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(
        np.isinf(got), np.isinf(ref))
    scale = testing.product_scale(a, b)
    result = tensor_pair.agree("matmul", np.where(finite, got, 0), np.where(finite, ref, 0),
                               scale=np.where(finite, scale, 0), length=320)
    assert result.ok, result


@pytest.mark.gpu
@pytest.mark.parametrize("value", [2.0 ** 70, 1e-35, 3e38, -2.0 ** 100])
def test_a_value_far_from_the_others_stays_on_tensor_cores(tensor_pair, rng, monkeypatch,
                                                           value):
    """Values bfloat16 pieces could not hold (huge, tiny) are scaled with their row or
    column: their tiles stay on the tensor cores (not the fma kernel's bits) and every
    output is within the bound, the floor of the other values in that row included. An
    output overflows where the bound decides it: (130, 200)'s two terms each pair a row's or
    column's largest with a value far below the other's, so the floor may drop them."""
    a, b, a_st, b_st = operands(rng, (256, 320), (320, 256), False, False)
    a[130, 5] = value
    b[7, 200] = value
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TENSOR_TILE))
    ref, got = tensor_pair.twin("matmul", a_st, b_st, False, False)
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TILES["square"]))
    _, fma = tensor_pair.twin("matmul", a_st, b_st, False, False)
    assert not np.array_equal(got[128:, :128].view(np.uint32), fma[128:, :128].view(np.uint32))
    assert not np.isnan(got).any()
    exact = np.abs(a.astype(np.float64) @ b.astype(np.float64))
    slack = 1e-3 * testing.product_scale(a, b)       # (far more than 2 gamma(320) S)
    top = float(np.finfo(np.float32).max)
    overflows, stays = exact - slack > top, exact + slack < top
    assert np.isinf(got[overflows]).all() and np.isfinite(got[stays]).all()
    assert overflows.any() == (value == 3e38) and stays.sum() > 0.9 * got.size
    finite = np.isfinite(ref)
    result = tensor_pair.agree("matmul", np.where(finite, got, 0), np.where(finite, ref, 0),
                               scale=np.where(finite, testing.product_scale(a, b), 0),
                               length=320)
    assert result.ok, result


@pytest.mark.gpu
@pytest.mark.parametrize("low", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_a_16_bit_product_on_tensor_cores_stores_its_bias_relu_and_rounding(
        tensor_pair, rng, monkeypatch, low):
    """16-bit operands and a 16-bit C with a bias and a relu (a linear layer's forward under
    autocast): within the bound of the cpu's; the tile an unsplittable value sends to the
    exact path is the fma kernel's bits (each output rounded once after the bias and the
    relu by both)."""
    low = np.dtype(low)
    a, b, _, _ = operands(rng, (256, 320), (320, 256), False, False)
    a[130, 5] = np.inf                 # in the tile of rows 128..255
    a16, b16 = a.astype(low), b.astype(low)
    bias = rng.uniform(-3.0, 3.0, 256).astype(np.float32)
    epilogue = Epilogue(bias=bias, relu=True)
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TENSOR_TILE))
    ref, got = tensor_pair.twin("matmul", a16, b16, False, False, None, epilogue, low, low)
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TILES["square"]))
    _, fma = tensor_pair.twin("matmul", a16, b16, False, False, None, epilogue, low, low)
    assert got.dtype == fma.dtype == low
    assert np.array_equal(got[128:, :128].view(np.uint16), fma[128:, :128].view(np.uint16))
    assert (got == 0).any() and (got > 0).any()                   # (the relu took some)
    got, ref = got.astype(np.float32), ref.astype(np.float32)
    finite = np.isfinite(ref) & np.isfinite(got)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    wide = [x.astype(np.float64) for x in (a16, b16)]
    scale = np.abs(wide[0]) @ np.abs(wide[1]) + np.abs(bias)
    result = tensor_pair.agree(f"matmul:bias:autocast@{low}", np.where(finite, got, 0),
                               np.where(finite, ref, 0), scale=np.where(finite, scale, 0),
                               length=320)
    assert result.ok, result


@pytest.mark.gpu
def test_a_big_product_runs_on_tensor_cores_by_itself(tensor_pair, rng):
    m, n, k = 2048, 1024, 1024
    assert plans.matmul_plan(m, n, k, 1, tensor_cores=True).tile.shader == "matmul_bf16x6"
    assert matmul.matmul_recipe((m, k), (n, k), False, True, (m, n, k, 1),
                                (48 << 10, 1024, True), plans.matmul_plan).shader == \
        "matmul_f16x3"
    agree(tensor_pair, *operands(rng, (m, k), (k, n), False, True), False, True)
