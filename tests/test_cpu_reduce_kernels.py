"""The cpu reduction kernels' definitions. The max of float32 runs (reduce.py's integer-bit
path) against a plain NumPy statement of its rule: NaN anywhere gives NaN, +0 beats -0 in
either order, and otherwise the largest element; an empty run gives -inf; a min is
-max(-x) bit for bit. A sum over leading axes adds the rows in order; a sum of squares is the
exact one rounded once."""
import math

import numpy as np
import pytest

from dualgrad.cpu.reduce import reduce

POOL = np.array([0.0, -0.0, np.inf, -np.inf, 1.5, -1.5, 1e-45, -1e-45, 3e38, -3e38,
                 2.0, -2.0], np.float32)
NANS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345], np.uint32).view(np.float32)


def reference_max(rows: np.ndarray) -> np.ndarray:
    """max_of over each row of a 2-D float32 array, one row at a time in NumPy."""
    out = np.empty(rows.shape[0], np.float32)
    for i, row in enumerate(rows):
        if row.size == 0:
            out[i] = -np.inf
        elif np.isnan(row).any():
            out[i] = np.nan
        else:
            top = row.max()
            positive_zero = ((row == 0) & ~np.signbit(row)).any()
            out[i] = np.float32(0.0) if top == 0 and positive_zero else top
    return out


def assert_same(got, want):
    """Equal bits, or both NaN (of any payload): a sign of zero must match."""
    got, want = got.reshape(-1), want.reshape(-1)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (got[~same][:5], want[~same][:5])


def _rows(rng, count, length, pool):
    return rng.choice(pool, size=(count, length)).astype(np.float32)


@pytest.mark.parametrize("length", [1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 1027])
def test_max_of_rows_of_specials_matches_the_rule(length):
    rng = np.random.default_rng(length)
    with_nans = np.concatenate([POOL, NANS[:1]])
    for pool in (POOL, with_nans, POOL[:2], POOL[[1, 3]], POOL[[0, 1, 3]]):
        x = _rows(rng, 300, length, pool)
        assert_same(reduce("max", x, (1,)), reference_max(x))


@pytest.mark.parametrize("length", [1, 2, 3, 17, 40, 1024])
def test_a_nan_anywhere_in_a_row_gives_nan(length):
    rng = np.random.default_rng(7)
    for nan in NANS:                       # either sign, quiet or signalling
        x = rng.standard_normal((length, length)).astype(np.float32)
        np.fill_diagonal(x, nan)           # one NaN per row, at every position in turn
        x[0, :] = np.inf
        x[0, -1] = nan
        assert np.isnan(reduce("max", x, (1,))).all()


@pytest.mark.parametrize("row, want", [
    ([-0.0, 0.0], 0.0), ([0.0, -0.0], 0.0), ([-0.0, -0.0], -0.0), ([-0.0], -0.0),
    ([-1.0, -0.0, -2.0], -0.0), ([-np.inf, -0.0], -0.0), ([-np.inf] * 5, -np.inf),
    ([-np.inf, -3e38], -3e38), ([-1e-45, -2.0], -1e-45), ([np.inf, -np.inf], np.inf),
    ([-0.0] * 40 + [0.0], 0.0), ([0.0] + [-0.0] * 40, 0.0), ([-5.0, -0.5, -7.0], -0.5),
])
def test_signed_zeros_infinities_and_negative_rows(row, want):
    got = reduce("max", np.array([row], np.float32), (1,))
    assert_same(got, np.array([want], np.float32))


def test_every_order_of_a_row_gives_the_same_bits():
    rng = np.random.default_rng(3)
    row = np.array([-0.0, 0.0, -1.0, -0.0, -np.inf, -2.0, 0.0], np.float32)
    for _ in range(50):
        assert_same(reduce("max", rng.permutation(row)[None], (1,)), np.float32([0.0]))


@pytest.mark.parametrize("length", [1, 3, 33, 64, 65, 1027, 1 << 18])
@pytest.mark.parametrize("layout", ["rows", "one run", "float64", "leading axis"])
def test_min_is_minus_the_max_of_minus_x(length, layout):
    # one pass of min gives -max(-x)'s bits: -0 against +0 gives -0, NaN wins (one run of
    # 2^18 takes the chunked path)
    rng = np.random.default_rng(length)
    with_nans = np.concatenate([POOL, NANS[:1]])
    for pool in (POOL, with_nans, POOL[:2], POOL[[0, 2]], POOL[[0, 1, 2]]):
        x = _rows(rng, 3 if length > 1000 else 40, length, pool)
        if layout == "one run":
            x = x[:1]
        if layout == "float64":
            x = x.astype(np.float64)
        axes = (0,) if layout == "leading axis" else (1,)
        want = -reference_max(-np.moveaxis(x, axes[0], -1).reshape(-1, x.shape[axes[0]])
                              .astype(np.float32))
        assert_same(reduce("min", x, axes).astype(np.float32), want)


@pytest.mark.parametrize("row, want", [
    ([-0.0, 0.0], -0.0), ([0.0, -0.0], -0.0), ([0.0, 0.0], 0.0), ([0.0] * 40 + [-0.0], -0.0),
    ([np.inf, 0.0], 0.0), ([np.inf] * 3, np.inf), ([1e-45, 2.0], 1e-45), ([5.0, 0.5], 0.5),
])
def test_min_of_signed_zeros_and_infinities(row, want):
    got = reduce("min", np.array([row], np.float32), (1,))
    assert_same(got, np.array([want], np.float32))


def test_empty_runs_give_minus_infinity():
    assert_same(reduce("max", np.zeros((3, 0), np.float32), (1,)), np.full(3, -np.inf,
                                                                            np.float32))
    assert_same(reduce("max", np.zeros(0, np.float32), (0,)), np.float32(-np.inf))


@pytest.mark.parametrize("shape, axes", [((6, 37), (1,)), ((6, 37), (0, 1)),
                                         ((4, 5, 33), (2,)), ((4, 5, 33), (1, 2)),
                                         ((6, 37), (0,)), ((4, 5, 33), (0, 2))])
def test_other_layouts_agree_with_the_float64_kernels(shape, axes):
    # the float64 input takes the general lane kernels; rounded, the float32 path matches
    rng = np.random.default_rng(5)
    x = rng.choice(np.concatenate([POOL, rng.standard_normal(20).astype(np.float32)]),
                   size=shape).astype(np.float32)
    got = reduce("max", x, axes, keepdims=True)
    assert got.dtype == np.float32
    assert_same(got, reduce("max", x.astype(np.float64), axes, keepdims=True)
                .astype(np.float32))
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))   # reduced axes last
    count = int(np.prod([shape[a] for a in axes]))
    assert_same(got, reference_max(moved.reshape(-1, count)).reshape(got.shape))

def test_a_non_contiguous_input_is_read_correctly():
    x = np.random.default_rng(2).standard_normal((8, 50)).astype(np.float32)
    view = x[:, ::2]
    assert_same(reduce("max", view, (1,)), reference_max(np.ascontiguousarray(view)))


@pytest.mark.parametrize("rows", [5, 6, 9], ids=lambda n: f"{n}-rows")
@pytest.mark.parametrize("columns", [1, 7, 64])
def test_sums_over_leading_axes_add_the_rows_in_order(rows, columns):
    # In float64, 2**53 + 1 rounds back to 2**53: added in order, the column
    # [2**53, 1, 1, -2**53, 1, (1, 1, 1, 1)] sums to 1 plus the ones after the fifth row;
    # grouped as (2**53 + 1) + (1 - 2**53) + 1, the first five would give 2.
    col = np.array([2.0 ** 53, 1, 1, -(2.0 ** 53), 1, 1, 1, 1, 1], np.float32)[:rows]
    x = np.repeat(col[:, None], columns, axis=1)
    want = 1.0 + max(0, rows - 5)
    assert np.all(reduce("sum", x, (0,)) == want)
    assert np.all(reduce("sum", x.reshape(1, rows, columns), (1,)) == want)


@pytest.mark.parametrize("axes", [(0, 2, 3), (0, 3), (1, 3)])
def test_reductions_ending_in_the_last_axis_round_a_float64_result_once(axes):
    """Outer axes and trailing ones (a convolution's bias gradient: 0, 2, 3), reduced as
    runs first and then across: still within one float32 ULP of the float64 result."""
    x = np.random.default_rng(3).standard_normal((6, 5, 7, 70)).astype(np.float32) * 100
    wide = x.astype(np.float64)
    for op, want in (("sum", wide.sum(axes)), ("mean", wide.mean(axes)),
                     ("max", wide.max(axes))):
        got = reduce(op, x, axes)
        assert got.dtype == np.float32 and got.shape == want.shape
        ulp = np.spacing(np.abs(want).astype(np.float32))
        assert np.all(np.abs(got - want) <= ulp), op
    assert_same(reduce("max", x, axes), x.max(axes))


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "max"])
def test_big_reductions_give_the_same_bits_on_any_number_of_cores(monkeypatch, op):
    """Runs cut across the cores, a long run in chunks fixed by its length (and a sum over a
    leading axis): each output is the same bits with one core or two, and within float32's
    rounding of the float64 result (max: its rule exactly)."""
    from dualgrad.cpu import reduce as reduce_module, split
    rng = np.random.default_rng(7)
    n = 17 * reduce_module.CHUNK + 3                # a long run: chunks, one part short
    line = (1 + rng.standard_normal(n) * (1e-5 if op == "prod" else 1.0)).astype(np.float32)
    if op == "max":
        line[rng.choice(n, 4, replace=False)] = [0.0, -0.0, -np.inf, 3.5]
    cases = [(line.reshape(1, -1), (1,)), (line[:1 << 20].reshape(256, 4096), (1,)),
             (line[:1 << 20].reshape(512, 2048), (0,))]
    for x, axes in cases:
        results = []
        for cores in (1, 2):
            monkeypatch.setattr(split, "cores", lambda c=cores: c)
            results.append(reduce(op, x, axes))
        assert_same(results[0], results[1])
        if op == "max":
            assert_same(results[1], reference_max(np.moveaxis(x, axes[0], -1).reshape(
                -1, x.shape[axes[0]])))
            continue
        wide = x.astype(np.float64)
        want = {"sum": wide.sum, "mean": wide.mean, "prod": wide.prod}[op](axis=axes)
        assert np.allclose(results[1], want.astype(np.float32), rtol=2 ** -23, atol=0)


def test_a_long_runs_max_keeps_nans_and_the_sign_of_zero_across_chunks():
    from dualgrad.cpu import reduce as reduce_module
    n = 4 * reduce_module.CHUNK
    for place, value, want in ((n - 1, np.nan, np.nan), (3, 0.0, 0.0), (n // 2, -0.0, -0.0)):
        x = np.full(n, -1.0, np.float32)
        x[1] = -0.0
        x[place] = value
        got = reduce("max", x.reshape(1, -1), (1,))
        assert_same(got, np.array([want], np.float32))


@pytest.mark.parametrize("shape, axes", [((1, 1 << 18), (1,)), ((40, 1027), (1,)),
                                         ((40, 1027), (0,)), ((6, 5, 33), (0, 2)),
                                         ((6, 5, 33), (1,)), ((6, 5, 33), (0, 1, 2))])
def test_a_sum_of_squares_is_the_exact_sum_rounded_once(shape, axes):
    # float32 squares are exact in float64, so the float64 sum of them is within a few
    # units of 2^-53 of the exact one: rounded to float32, the exact sum's bits (one run of
    # 2^18 takes the chunked path, whose partial sums are added, not squared again)
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim)).astype(np.float64)
    lines = (moved * moved).reshape(-1, int(np.prod([shape[a] for a in axes])))
    want = np.array([math.fsum(line) for line in lines], np.float32)
    got = reduce("sum_squares", x, axes)
    assert got.dtype == np.float32
    assert_same(got, want)


@pytest.mark.parametrize("shape, axes", [((1, 1 << 18), (1,)), ((40, 1027), (1,)),
                                         ((40, 1027), (0,)), ((6, 5, 33), (0, 2)),
                                         ((6, 5, 33), (1,)), ((6, 5, 33), (0, 1))])
def test_a_sum_of_squares_about_centers_takes_each_outputs_own(shape, axes):
    # centers far from each other and from the data: an output that took another's
    # center, or none, is off by far more than a rounding
    rng = np.random.default_rng(len(shape) + sum(axes))
    x = (rng.standard_normal(shape) + 50).astype(np.float32)
    kept = tuple(1 if a in axes else n for a, n in enumerate(shape))
    center = (50 + np.arange(np.prod(kept)).reshape(kept) * 0.25).astype(np.float32)
    moved = np.moveaxis((x.astype(np.float64) - center), axes,
                        range(x.ndim - len(axes), x.ndim))
    lines = (moved * moved).reshape(-1, int(np.prod([shape[a] for a in axes])))
    want = np.array([math.fsum(line) for line in lines], np.float32)
    assert_same(reduce("sum_squares", x, axes, center=center), want)


@pytest.mark.parametrize("shape, axes", [((1, 1 << 18), (1,)), ((40, 1027), (1,)),
                                         ((40, 1027), (0,)), ((6, 5, 33), (0, 2)),
                                         ((6, 5, 33), (1,))])
def test_a_sum_of_exponentials_about_centers_is_the_float64_sum_rounded_once(shape, axes):
    # each output's own center (its maximum, as a log-sum-exp takes it); the terms in
    # float64 are within a few units of 2^-53, so rounded once the float32 sum is fsum's
    rng = np.random.default_rng(len(shape) + sum(axes))
    x = rng.uniform(-20, 20, shape).astype(np.float32)
    center = np.max(x, axis=axes, keepdims=True)
    moved = np.moveaxis(np.exp(x.astype(np.float64) - center), axes,
                        range(x.ndim - len(axes), x.ndim))
    lines = moved.reshape(-1, int(np.prod([shape[a] for a in axes])))
    want = np.array([math.fsum(line) for line in lines], np.float32)
    assert_same(reduce("sum_exp", x, axes, center=center), want)
