"""matmul and reduce on the gpu against the cpu reference under every way plans.py cuts them
into dispatches: each matmul tile at its edges (sizes one past a tile, K not a whole step),
with and without vec4 loads, transposed operands, split K; reductions run by workgroups or
by threads, in one pass or several, over every index layout. Plus the plans' arithmetic."""
import numpy as np
import pytest

from dualgrad import testing
from dualgrad.api import device
from dualgrad.backend import Epilogue
from dualgrad.gpu import plans, workspace
from dualgrad.gpu.kernels import matmul

from conftest import covering


LIMITS = (48 << 10, 1024, False)          # shared memory, threads, tensor cores

# Axes of the tile tests: each combination is a pipeline of its own (``covering``).
NAME = [(n, n) for n in sorted(plans.TILES)]
VEC = [("vec4", True), ("scalar", False)]
SPLIT = [("whole-k", False), ("split-k", True)]
TRANS = {"trans_a,trans_b": [("NN", (False, False)), ("TN", (True, False)),
                             ("NT", (False, True)), ("TT", (True, True))]}


def f32(rng, *shape):
    return np.asarray(rng.uniform(-3.0, 3.0, shape), dtype=np.float32)


@pytest.fixture
def pair(gpu):
    return testing.Pair(device.active())


def check_matmul(pair, rng, sa, sb, trans_a, trans_b, bias=False, relu=False, mask=False):
    a, b = f32(rng, *sa), f32(rng, *sb)
    c = f32(rng, sb[-1]) if bias else None
    a_st = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans_a else a
    b_st = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
    shape = np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])     # the product's
    g = f32(rng, *shape) if mask else None
    ref, got = pair.twin("matmul", a_st, b_st, trans_a, trans_b, None,
                         Epilogue(bias=c, relu=relu, mask=g))
    if relu or mask:
        assert (ref == 0).any() and (ref != 0).any()     # (the relu or mask decided)
    scale = testing.product_scale(a, b)
    if bias:
        scale = scale + np.abs(c.astype(np.float64))
    key = ("matmul:mask" if mask else "matmul:relu" if relu else "matmul:bias" if bias
           else "matmul")
    result = pair.agree(key, got, ref, scale=scale,
                        length=sa[-1])
    assert result.ok, result


def device_limits():
    limits = device.active().ctx.limits
    return limits.maxComputeSharedMemorySize, limits.maxComputeWorkGroupInvocations


def require_fits(tile):
    """Skip, saying why, a tile this device cannot run (lavapipe has 32 KiB of shared
    memory, "wide" needs 48): test_plans_respect_the_device shows it is never chosen here."""
    if not tile.fits(*device_limits()):
        pytest.skip(f"{tile} needs {tile.shared_bytes} bytes of shared memory; this device "
                    f"has {device_limits()[0]}")


def forced(tile, splits):
    """A matmul_plan that always answers ``tile`` with K cut in about ``splits`` slices."""
    return lambda m, n, k, batch, *limits: plans.sliced(tile, k, splits)


def forced_recipe(tile, splits, m, n, k, trans_a, trans_b):
    """``forced(tile, splits)`` and the dispatch it makes of op(A) (m x k) @ op(B) (k x n),
    each operand stored transposed where its flag says so."""
    plan = forced(tile, splits)
    sa, sb = ((k, m) if trans_a else (m, k)), ((n, k) if trans_b else (k, n))
    return plan, matmul.matmul_recipe(sa, sb, trans_a, trans_b, (m, n, k, 1), LIMITS, plan)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(name=NAME, vec=VEC, split=SPLIT, **TRANS))
def test_matmul_tile_edges(pair, rng, monkeypatch, name, vec, split, trans_a, trans_b):
    tile = plans.TILES[name]
    require_fits(tile)
    # One past a tile in M and N (a second, nearly empty tile), K a few steps and a part;
    # all multiples of 4 for the vec4 path, none for the scalar one.
    m, n = tile.bm + (4 if vec else 3), tile.bn + (8 if vec else 5)
    k = 2 * tile.bk + (4 if vec else 7)
    monkeypatch.setattr(plans, "matmul_plan", forced(tile, 3 if split else 1))
    check_matmul(pair, rng, (m, k), (k, n), trans_a, trans_b)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(name=NAME, split=SPLIT, **TRANS))
def test_matmul_whole_tiles(pair, rng, monkeypatch, name, split, trans_a, trans_b):
    # Two tiles each way and whole K steps: the kernel's variant without bounds tests.
    tile = plans.TILES[name]
    require_fits(tile)
    m, n, k = 2 * tile.bm, 2 * tile.bn, 6 * tile.bk
    splits = 3 if split else 1
    plan, r = forced_recipe(tile, splits, m, n, k, trans_a, trans_b)
    assert r.spec[12] == 1 and r.shader == "matmul"                     # WHOLE
    assert (r.partials is not None) == split
    # ... which a product one quad short of whole tiles takes in its inner tiles only, and
    # a product of K one quad past whole steps in none.
    assert forced_recipe(tile, splits, m - 4, n, k, trans_a, trans_b)[1].spec[12] == 2
    assert forced_recipe(tile, splits, m, n, k + 4, trans_a, trans_b)[1].spec[12] == 0
    monkeypatch.setattr(plans, "matmul_plan", plan)
    check_matmul(pair, rng, (m, k), (k, n), trans_a, trans_b)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(name=NAME, split=SPLIT, **TRANS,
                                   past=[("a quad past", 4), ("9 quads past", 36)]))
def test_matmul_inner_tiles_whole_edge_tiles_tested(pair, rng, monkeypatch, name, split,
                                                    trans_a, trans_b, past):
    """Whole K steps but M and N past whole tiles (WHOLE 2): the inner tiles run without
    bounds tests, the edge tiles with them, skipping the multiply-adds of their threads'
    quads of rows and columns that lie outside C (a quad past: all but each thread's
    first; 9 quads past: on some tiles none)."""
    tile = plans.TILES[name]
    require_fits(tile)
    m, n, k = tile.bm + past, tile.bn + past, 6 * tile.bk
    plan, r = forced_recipe(tile, 3 if split else 1, m, n, k, trans_a, trans_b)
    assert r.spec[12] == 2 and r.shader == "matmul_edges"               # WHOLE
    assert (r.partials is not None) == split
    monkeypatch.setattr(plans, "matmul_plan", plan)
    check_matmul(pair, rng, (m, k), (k, n), trans_a, trans_b)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(
    name=NAME, split=SPLIT,
    layout=[(x, x) for x in ("edge-vec4", "edge-scalar", "whole", "inner-whole", "batched")],
    then=[("bias", ""), ("relu", "relu"), ("mask", "mask")]))
def test_matmul_adds_the_bias_as_it_stores_the_product(pair, rng, monkeypatch, name, split,
                                                       layout, then):
    """The bias (and the relu or the mask after it) on every store path: an edge tile with
    vec4 or scalar stores, whole tiles (no bounds tests), split K (added once, after the
    slices), a batch sharing it."""
    relu, mask = then == "relu", then == "mask"
    tile = plans.TILES[name]
    require_fits(tile)
    plan = forced(tile, 3 if split else 1)
    monkeypatch.setattr(plans, "matmul_plan", plan)
    if layout == "whole":
        m, n, k = 2 * tile.bm, 2 * tile.bn, 6 * tile.bk
        r = matmul.matmul_recipe((m, k), (n, k), False, True, (m, n, k, 1), LIMITS, plan,
                                 (True, relu, mask, False))
        assert r.spec[12:16] == (1, 1, int(relu), int(mask))  # WHOLE, BIAS, RELU_C, MASK_C
        check_matmul(pair, rng, (m, k), (k, n), False, True, True, relu, mask)
    elif layout == "inner-whole":       # whole K steps, M and N a quad past whole tiles
        m, n, k = tile.bm + 4, 2 * tile.bn + 4, 6 * tile.bk
        r = matmul.matmul_recipe((m, k), (n, k), False, True, (m, n, k, 1), LIMITS, plan,
                                 (True, relu, mask, False))
        assert r.spec[12:16] == (2, 1, int(relu), int(mask)) and r.shader == "matmul_edges"
        check_matmul(pair, rng, (m, k), (k, n), False, True, True, relu, mask)
    elif layout == "batched":
        check_matmul(pair, rng, (3, 21, 37), (37, 18), False, True, True, relu, mask)
    else:
        vec = layout == "edge-vec4"
        m, n = tile.bm + (4 if vec else 3), tile.bn + (8 if vec else 5)
        k = 2 * tile.bk + (4 if vec else 7)
        check_matmul(pair, rng, (m, k), (k, n), False, True, True, relu, mask)
        check_matmul(pair, rng, (m, k), (k, n), True, False, True, relu, mask)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(
    name=NAME, layout=[(x, x) for x in ("edge-vec4", "edge-scalar", "whole", "inner-whole",
                                        "split-k", "batched")]))
def test_matmul_writes_the_row_sums_of_a_beside_the_product(pair, rng, monkeypatch, name,
                                                            layout):
    """op(A)'s row sums (a bias gradient) on every path: written by the first column of
    tiles as it loads A (edge tiles with vec4 or scalar loads, whole tiles, whole inner
    tiles beside edge ones), or, where K is split or the product batched, by a reduction
    after it."""
    from dualgrad.testing import differential
    tile = plans.TILES[name]
    require_fits(tile)
    monkeypatch.setattr(plans, "matmul_plan", forced(tile, 3 if layout == "split-k" else 1))
    vec = layout != "edge-scalar"
    m, n = tile.bm + (4 if vec else 3), 2 * tile.bn + (8 if vec else 5)
    k = 2 * tile.bk + (4 if vec else 7)
    if layout == "whole":
        m, n, k = 2 * tile.bm, 2 * tile.bn, 6 * tile.bk
    elif layout == "inner-whole":
        m, n, k = 2 * tile.bm + 4, tile.bn + 4, 6 * tile.bk
    counters = device.active().device.rec.counters
    for trans_a in (False, True):
        a = f32(rng, *((3, m, k) if layout == "batched" else (m, k)))
        before = counters.dispatches
        results = differential.matmul_sums_agreement(pair, a, f32(rng, k, n), trans_a, False)
        assert all(r.ok for r in results), results
        assert counters.dispatches - before == (
            1 if layout.startswith(("edge", "whole", "inner")) else 2)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(name=NAME, split=SPLIT,
                                   shared_b=[("one B", True), ("a B each", False)]))
def test_batched_inner_tiles_whole_edge_tiles_tested(pair, rng, monkeypatch, name, split,
                                                     shared_b):
    """WHOLE 2 across a batch: each matrix's inner tiles without bounds tests, its edge
    tiles with them, at the batch strides of A, B (or one B for all) and C."""
    tile = plans.TILES[name]
    require_fits(tile)
    m, n, k, batch = tile.bm + 4, tile.bn + 4, 6 * tile.bk, 3
    sa, sb = (batch, m, k), ((k, n) if shared_b else (batch, k, n))
    plan = forced(tile, 3 if split else 1)
    r = matmul.matmul_recipe(sa, sb, False, False, (m, n, k, batch), LIMITS, plan)
    assert r.spec[12] == 2 and r.shader == "matmul_edges"               # WHOLE
    monkeypatch.setattr(plans, "matmul_plan", plan)
    check_matmul(pair, rng, sa, sb, False, False)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(
    name=NAME, shapes=[(str(s), s) for s in [((3, 21, 37), (37, 18)),
                                             ((2, 20, 36), (2, 36, 24))]]))
def test_batched_split_k(pair, rng, monkeypatch, name, shapes):
    tile = plans.TILES[name]
    require_fits(tile)
    monkeypatch.setattr(plans, "matmul_plan", forced(tile, 2))
    check_matmul(pair, rng, *shapes, False, False)
    check_matmul(pair, rng, *shapes, True, True)


@pytest.mark.gpu
@pytest.mark.parametrize(*covering(
    shapes=[(str(s), s) for s in [((200, 24), (24, 20)),          # rows: bands of 48
                                  ((20, 24), (24, 300)),          # columns: transposed
                                  ((7, 20, 24), (24, 20)),        # batch: bands of 3
                                  ((2, 200, 24), (2, 24, 20)),    # batch and rows
                                  ((2, 20, 24), (2, 24, 300))]],  # batch and columns
    **{"trans_a,trans_b": [("NN", (False, False)), ("TT", (True, True)),
                           ("TN", (True, False))]},
    then=[("plain", ""), ("bias", "bias"), ("mask", "mask")]))
def test_a_product_past_the_grid_limit_runs_in_bands(pair, rng, monkeypatch, shapes,
                                                     trans_a, trans_b, then):
    """A grid dimension holds at most MAX_GROUPS workgroups (65535 on most devices): with
    the backend's limit set to 3, products that pass it in rows, columns or batch agree
    with the reference, in several dispatches."""
    monkeypatch.setattr(matmul, "MAX_GROUPS", 3)
    counters = device.active().device.rec.counters
    before = counters.dispatches
    check_matmul(pair, rng, *shapes, trans_a, trans_b, then == "bias", mask=then == "mask")
    assert counters.dispatches - before >= 2


@pytest.mark.exhaustive
@pytest.mark.gpu
def test_a_product_of_more_row_tiles_than_a_grid_holds(pair, rng):
    # 4 194 368 rows on 64-row tiles: 65 537 tiles down the grid, past its 65 535.
    check_matmul(pair, rng, (65537 * 64, 4), (4, 8), False, False, bias=True)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 300, pytest.param(70000, marks=pytest.mark.exhaustive)],
                         ids=["1 row", "300 rows", "70000 rows"])
def test_the_cross_entropys_mean_is_made_in_its_dispatch(pair, rng, rows):
    # The last workgroup to finish its rows adds the rows' losses (past SCRATCH of them, kept
    # in storage of their own; past MAX_GROUPS, workgroups take several rows each): one
    # dispatch, the counter back at 0, so a loss that takes the same counter again (the
    # workspace's counters taken from the first once more) keeps its bits, and agrees with
    # the reference.
    be = device.active()
    x = np.asarray(rng.uniform(-6.0, 6.0, (rows, 10)), np.float32)
    t = rng.integers(0, 10, rows)
    hx, ht = be.upload(x), be.indices(t)
    be.device.workspace.make()
    first = be.device.workspace.cursors[0]
    before = be.device.rec.counters.dispatches
    losses = [be.softmax_cross_entropy(hx, ht)[0]]
    assert be.device.rec.counters.dispatches - before == 1
    space = be.device.workspace
    space.take(workspace.COUNTER, space.arrays[0].size)     # the rest of the counters, then
    if first:                                        # the ones before the first loss's
        space.take(workspace.COUNTER, first)
    losses.append(be.softmax_cross_entropy(hx, ht)[0])
    assert space.cursors[0] == first + 64            # (it took the first one's counter)
    losses += [be.softmax_cross_entropy(hx, ht)[0] for _ in range(2)]
    got = [be.download(loss) for loss in losses]
    assert all(np.array_equal(g, got[0]) for g in got)
    (ref, _), _ = pair.twin("softmax_cross_entropy", x, t)
    per_row = np.abs(x).max(axis=1) + np.log(10.0) + np.abs(x[np.arange(rows), t])
    assert pair.agree("softmax_cross_entropy", got[0], ref, scale=per_row.mean(),
                      length=10 + rows).ok


@pytest.mark.gpu
def test_split_k_finishes_in_one_dispatch_and_leaves_its_counters_at_zero(pair, rng,
                                                                          monkeypatch):
    # The last slice of each tile adds the partial products: one dispatch. Its counters are
    # the reduction workspace's, back at 0 for the next product or reduction that uses them:
    # many split products and reductions in a row, no wait between them, all agree.
    be = device.active()
    monkeypatch.setattr(plans, "matmul_plan", forced(plans.TILES["medium"], 4))
    a, b = f32(rng, 70, 300), f32(rng, 300, 90)
    ha, hb = be.upload(a), be.upload(b)
    before = be.device.rec.counters.dispatches
    outs = [be.matmul(ha, hb)]
    assert be.device.rec.counters.dispatches - before == 1
    x = f32(rng, 9, 5000)
    hx = be.upload(x)
    for _ in range(5):
        outs += [be.matmul(ha, hb), be.matmul(hb, ha, True, True)]
        sums = be.reduce("sum", hx, (1,))
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    first = be.download(outs[0])
    for i, got in enumerate(outs):
        got = be.download(got)
        np.testing.assert_allclose(got.T if i % 2 == 0 and i else got, want, rtol=1e-4,
                                   atol=1e-3)
    # Partial products are added in order of slice, whichever slice is last: same bits.
    assert all(np.array_equal(be.download(o), first) for o in outs[1::2])
    np.testing.assert_allclose(be.download(sums), np.sum(x.astype(np.float64), axis=1),
                               rtol=1e-4, atol=1e-3)


def test_split_k_keeps_k_whole_past_a_counter_per_tile():
    split = forced(plans.TILES["medium"], 4)
    small = matmul.matmul_recipe((64, 640), (640, 64), False, False, (64, 64, 640, 1), LIMITS,
                                 split)
    assert small.groups == (1, 1, 4) and small.partials == (4, 64, 64)
    # 2^16 + 1 batches of one tile each: a counter a tile would not fit in COUNTERS.
    batch = workspace.COUNTERS + 1
    big = matmul.matmul_recipe((batch, 64, 640), (640, 64), False, False,
                               (64, 64, 640, batch), LIMITS, split)
    assert big.groups == (1, 1, batch) and big.partials is None


# Shapes whose natural plans are each tile, with and without split K (the default run takes
# one shape per tile; the split ones are big products, seconds each on a software device).
NATURAL_PLANS = [(10, 33, 5, 1, "rows", 1), (257, 7, 9, 1, "cols", 1),
                 (130, 129, 40, 1, "medium", 1), (200, 300, 96, 1, "deep", 1),
                 (2050, 1000, 20, 1, "square", 1), (1030, 1000, 12, 4, "wide", 1)]
MORE_NATURAL_PLANS = [(10, 70, 4500, 1, "rows", 29), (300, 10, 8400, 1, "cols", 30),
                      (200, 300, 100, 1, "medium", 1), (64, 64, 5120, 1, "deep", 32),
                      (256, 520, 1024, 1, "deep", 8), (1030, 1000, 600, 1, "square", 2),
                      (1030, 1000, 20, 1, "medium", 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,batch,tile,splits", NATURAL_PLANS + [
    pytest.param(*case, marks=pytest.mark.exhaustive) for case in MORE_NATURAL_PLANS], ids=str)
def test_matmul_natural_plans(pair, rng, m, n, k, batch, tile, splits):
    plan = plans.matmul_plan(m, n, k, batch)
    assert (plan.tile, plan.splits) == (plans.TILES[tile], splits)
    lead = (batch,) if batch > 1 else ()
    check_matmul(pair, rng, lead + (m, k), (k, n), False, False)
    check_matmul(pair, rng, (m, k), lead + (k, n), True, True)


def test_small_products_take_k_steps_of_32_where_k_and_the_device_allow():
    deep, medium = plans.TILES["deep"], plans.TILES["medium"]
    assert plans.matmul_plan(200, 300, 96, 1).tile == deep
    assert plans.matmul_plan(200, 300, 100, 1).tile == medium     # not whole steps of 32
    assert plans.matmul_plan(200, 300, 32, 1).tile == medium      # one step only
    assert plans.matmul_plan(200, 300, 96, 1, 32 << 10, 1024).tile == medium   # 48 KiB
    assert plans.TILES["rows"].bk == plans.TILES["cols"].bk == 32


def test_square_tiles_take_over_from_deep_at_two_workgroups_a_sm():
    deep, square = plans.TILES["deep"], plans.TILES["square"]
    assert plans.matmul_plan(4096, 768, 256, 1)[:2] == (deep, 1)      # square: 192 groups
    assert plans.matmul_plan(4096, 256, 1024, 1)[:2] == (deep, 1)     # 64, split in 2
    assert plans.matmul_plan(4096, 1152, 256, 1)[:2] == (square, 1)   # 288
    # Where K is not whole steps of 32, square's threshold stays the one against medium.
    assert plans.matmul_plan(4096, 768, 250, 1)[:2] == (square, 1)
    assert plans.matmul_plan(1024, 1024, 600, 1)[:2] == (square, 2)


def test_deep_products_short_of_workgroups_split_k():
    deep = plans.TILES["deep"]
    assert plans.matmul_plan(256, 1024, 1024, 1)[:2] == (deep, 4)      # 32 groups, 128 slices
    assert plans.matmul_plan(256, 1024, 256, 1)[:2] == (deep, 1)       # K too short to split
    assert plans.matmul_plan(1024, 1024, 256, 1)[:2] == (deep, 1)      # deep fills the GPU
    assert plans.matmul_plan(64, 64, 5120, 1)[:2] == (deep, 32)        # no more groups


def test_k_is_split_until_about_a_slice_per_sm():
    # 32 workgroups of 128 x 64 split 4 ways (128 slices); 16 of 64 x 16 split 8.
    assert plans.matmul_plan(256, 1024, 1024, 1)[:2] == (plans.TILES["deep"], 4)
    assert plans.matmul_plan(1024, 10, 4096, 1)[:2] == (plans.TILES["cols"], 8)


@pytest.mark.gpu
def test_plans_respect_the_device(pair, rng):
    """On any device, every shape gets a tile it can run, the big ones included."""
    shared, threads = device_limits()
    for m, n, k, batch in [(1030, 1000, 12, 4), (4096, 4096, 8, 1), (520, 400, 20, 1),
                           (10, 70, 1100, 1), (300, 10, 21, 1), (130, 129, 40, 1)]:
        plan = plans.matmul_plan(m, n, k, batch, shared, threads)
        assert plan.tile.fits(shared, threads), (m, n, k, plan)
    check_matmul(pair, rng, (4, 1030, 12), (12, 1000), False, False)


# -- reductions ------------------------------------------------------------------------------
REDUCE_LAYOUTS = [((7, 40), (1,)), ((7, 41), (1,)), ((40, 7), (0,)), ((2, 30, 3), (1,)),
                  ((3, 4, 5, 6), (1, 3)), ((5, 9), (0, 1)), ((6, 0), (1,)), ((3, 1, 8), (2,))]


def check_reduce(pair, rng, op, shape, axes):
    x = f32(rng, *shape)
    if op == "max" and x.size:
        x.reshape(-1)[1::5] = 2.5                 # tied maxima, counted in max's backward
    ref, got = pair.twin("reduce", op, x, axes, True)
    n = int(np.prod([shape[a] for a in axes]))
    scale = np.sum(np.abs(x.astype(np.float64)), axis=axes, keepdims=True)
    if op == "mean":
        scale = scale / max(n, 1)
    result = pair.agree(f"reduce:{op}", got, ref, scale=scale, length=n)
    assert result.ok, result
    if x.size:
        g = f32(rng, *ref.shape)
        gref, ggot = pair.twin("reduce_backward", op, x, ref, g, axes)
        result = pair.agree(f"reduce_backward:{op}", ggot, gref)
        assert result.ok, result


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("group_items", [True, False], ids=["by-workgroup", "by-thread"])
@pytest.mark.parametrize("chunk", [4, 12, 1 << 20], ids=["chunk4", "chunk12", "one-pass"])
@pytest.mark.parametrize("shape,axes", REDUCE_LAYOUTS, ids=str)
def test_reduce_plans(pair, rng, monkeypatch, op, group_items, chunk, shape, axes):
    def choose(n_out, count, contiguous):
        return plans.ReducePlan(group_items, max(1, -(-count // chunk)), chunk)
    monkeypatch.setattr(plans, "reduce_plan", choose)
    check_reduce(pair, rng, op, shape, axes)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("shape,axes", [((3, 5000), (1,)), ((2, 4100), (1,)), ((300, 7), (0,)),
                                        ((20000,), (0,))], ids=str)
def test_reduce_natural_splits(pair, rng, op, shape, axes):
    x4 = (1,) * (4 - len(shape)) + shape
    reduced = frozenset(a + 4 - len(shape) for a in axes)
    n = int(np.prod([shape[a] for a in axes]))
    assert plans.reduce_plan(np.prod(shape) // n, n,
                             plans.reduce_layout(x4, reduced) == 1).splits > 1
    check_reduce(pair, rng, op, shape, axes)


@pytest.mark.gpu
def test_reduce_nan_survives_every_pass(pair, monkeypatch):
    monkeypatch.setattr(plans, "reduce_plan",
                        lambda n_out, count, contiguous: plans.ReducePlan(True, -(-count // 4), 4))
    x = np.arange(64, dtype=np.float32)
    x[37] = np.nan
    for op in ("sum", "max"):
        ref, got = pair.twin("reduce", op, x, (0,), False)
        assert np.isnan(ref) and np.isnan(got)


@pytest.mark.gpu
@pytest.mark.parametrize("chunk", [4, 1 << 20], ids=["multi-pass", "one-pass"])
def test_max_of_signed_zeros_does_not_depend_on_order(pair, rng, monkeypatch, chunk):
    # -0 against +0 gives +0 and NaN wins, whatever order the lanes, threads and passes
    # meet the elements in: cpu and gpu agree bit for bit on every arrangement.
    monkeypatch.setattr(plans, "reduce_plan",
                        lambda n_out, count, contiguous: plans.ReducePlan(
                            True, -(-count // chunk), chunk))
    pos, neg = np.uint32(0), np.uint32(0x80000000)
    base = np.array([-0.0] * 150 + [0.0] * 2 + [-1.0] * 100, np.float32)
    for _ in range(4):
        x = rng.permutation(base)
        for data, want in ((x, pos), (-np.abs(x), neg)):
            ref, got = pair.twin("reduce", "max", data, (0,), False)
            assert np.float32(ref).view(np.uint32) == np.float32(got).view(np.uint32) == want
        rows = x.reshape(4, 63)                     # per-row maxima through the lanes
        ref, got = pair.twin("reduce", "max", rows, (1,), False)
        assert np.array_equal(ref.view(np.uint32), got.view(np.uint32))
        x[rng.integers(x.size)] = np.nan
        ref, got = pair.twin("reduce", "max", x, (0,), False)
        assert np.isnan(ref) and np.isnan(got)


def reduce_dispatches(backend, op, x, axes) -> int:
    """How many dispatches the gpu's reduction of x takes."""
    h = backend.upload(x)
    before = backend.device.rec.counters.dispatches
    backend.reduce(op, h, axes)
    return backend.device.rec.counters.dispatches - before


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("group_items,chunk,dispatches", [
    (True, 4, 1), (False, 4, 2), (False, 32, 1)], ids=["by-workgroup", "by-thread-many",
                                                     "by-thread-few"])
def test_split_reductions_finish_in_one_dispatch_where_they_can(
        pair, rng, monkeypatch, op, group_items, chunk, dispatches):
    # 1000 elements an output: by workgroup, or by thread with at most FINISH_SPLITS
    # partial results, the last item combines them; 250 partial results a thread would
    # combine alone take a second pass instead. Either way, and for max's tie counts, the
    # cpu reference agrees.
    monkeypatch.setattr(plans, "reduce_plan", lambda n_out, count, contiguous:
                        plans.ReducePlan(group_items, -(-count // chunk), chunk))
    x = f32(rng, 3, 1000)
    assert reduce_dispatches(device.active(), op, x, (1,)) == dispatches
    check_reduce(pair, rng, op, (3, 1000), (1,))
    check_reduce(pair, rng, op, (1000, 5), (0,))


@pytest.mark.gpu
@pytest.mark.parametrize("scratch", [1 << 16, 4], ids=["workspace", "allocated"])
def test_finishing_reductions_keep_partials_in_the_workspace_or_their_own(pair, rng,
                                                                          monkeypatch, scratch):
    monkeypatch.setattr(workspace, "SCRATCH", scratch)
    for op in ("sum", "mean", "max"):
        check_reduce(pair, rng, op, (3, 5000), (1,))
        check_reduce(pair, rng, op, (700, 9), (0,))


@pytest.mark.gpu
def test_finishing_reductions_leave_their_counters_at_zero(pair, rng):
    # Each output's counter must be back at 0 for the next reduction that uses it: many in
    # a row over the same and over other outputs, no wait in between, all agree.
    be = device.active()
    xs = [f32(rng, 4, 3000), f32(rng, 9, 5000), f32(rng, 3000, 4), f32(rng, 20000)]
    axes = [(1,), (1,), (0,), (0,)]
    handles = [be.upload(x) for x in xs] * 3
    outs = [be.reduce("sum", h, a) for h, a in zip(handles, axes * 3)]
    for x, a, got in zip(xs * 3, axes * 3, outs):
        want = np.sum(x.astype(np.float64), axis=a)
        np.testing.assert_allclose(be.download(got), want, rtol=1e-4, atol=1e-3)


# -- the plans' arithmetic (no device) -------------------------------------------------------
def test_every_tile_fits_the_shader():
    for tile in plans.TILES.values():
        assert tile.fits(), tile
    assert not plans.Tile(128, 128, 32, 8, 8).fits()           # 64 KiB of shared memory


@pytest.mark.parametrize("m,n,k,batch", [(10, 4096, 1024, 1), (1024, 10, 4096, 1),
                                         (4096, 4096, 4096, 1), (256, 1024, 784, 1),
                                         (1, 1, 1, 1), (5, 7, 0, 1), (64, 64, 100000, 2)])
def test_split_k_slices_cover_k(m, n, k, batch):
    plan = plans.matmul_plan(m, n, k, batch)
    assert plan.kc % plan.tile.bk == 0
    assert (plan.splits - 1) * plan.kc < max(k, 1) <= plan.splits * plan.kc
    if plan.splits > 1:
        assert plan.kc >= plans.MIN_SPLIT_K


def test_reduce_plan_covers_every_element():
    for n_out, count, contiguous in [(1, 1 << 24, True), (4096, 4096, False), (1, 0, True),
                                     (70000, 2, True), (3, 300, False), (1, 1024, True)]:
        plan = plans.reduce_plan(n_out, count, contiguous)
        assert plan.chunk % 4 == 0 and plan.chunk > 0
        assert (plan.splits - 1) * plan.chunk < max(count, 1) <= plan.splits * plan.chunk
    assert plans.reduce_plan(1, 1 << 24, True).group_items
    assert plans.reduce_plan(1, 1 << 24, True).splits > 100          # a full sum spreads out


def test_a_variance_walks_runs_of_at_most_var_run():
    """A variance's workgroup item walks at most VAR_RUN elements, so that a thread's share
    of m about one of its elements stays within the tolerance's bound ((m + 3)(m + 1) <=
    n + 3, reduce.comp), and its items cover every element in one dispatch. Where a sum's runs
    are no longer, the variance takes the sum's plan (one read of each element)."""
    from dualgrad.gpu.kernels import reduce as gpu_reduce
    for n_out, count in [(1, 1 << 24), (2, 2_100_004), (1, 5000), (3, 40000), (1024, 1 << 20),
                         (1, 300)]:
        (only,) = gpu_reduce.reduce_passes(gpu_reduce.VAR, n_out, count, 0, 1, None,
                                           plans.reduce_plan)
        _, _, splits, chunk = only.uints[:4]
        assert chunk <= plans.VAR_RUN and (splits - 1) * chunk < count <= splits * chunk
        m = -(-chunk // plans.WG)
        assert (m + 3) * (m + 1) <= count + 3
        sum_plan = plans.reduce_plan(n_out, count, True)
        if sum_plan.chunk <= plans.VAR_RUN:
            assert (splits, chunk) == (sum_plan.splits, sum_plan.chunk)
    assert plans.reduce_plan(1024, 1 << 20, True).chunk > plans.VAR_RUN     # (capped above)


@pytest.mark.parametrize("shape4,reduced,inner", [
    ((1, 1, 7, 40), {3}, 1), ((1, 1, 40, 7), {2}, 7), ((1, 2, 30, 3), {2}, 3),
    ((3, 4, 5, 6), {1, 3}, None), ((3, 4, 1, 6), {1, 2}, 6), ((1, 1, 5, 9), {2, 3}, 1),
    ((2, 1, 3, 1), {1}, 1)])
def test_reduce_layout(shape4, reduced, inner):
    assert plans.reduce_layout(shape4, frozenset(reduced)) == inner
