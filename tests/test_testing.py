"""The comparison the differential tests rely on must itself be able to fail, and the exported
strategies must reach the cases they promise."""
import numpy as np
import pytest

from dualgrad.testing import TOLERANCES, agreement, gamma, ulp_distance

F = np.float32


def test_ulp_distance_counts_representable_steps():
    one = F(1.0)
    assert ulp_distance(one, np.nextafter(one, F(2))) == 1
    assert ulp_distance(F(0.0), F(-0.0)) == 0
    assert ulp_distance(np.nextafter(F(0), F(1)), np.nextafter(F(0), F(-1))) == 2
    assert ulp_distance(F(np.nan), F(np.nan)) == 0
    assert np.isinf(ulp_distance(F(np.nan), one))


def test_exact_entries_reject_one_ulp_and_a_sign_of_zero():
    ref = np.array([1.0, 0.0], F)
    assert agreement("binary:add", ref.copy(), ref).ok
    assert not agreement("binary:add", np.array([np.nextafter(F(1), F(2)), 0.0], F), ref).ok
    assert not agreement("binary:add", np.array([1.0, -0.0], F), ref).ok


def test_ulp_entries_allow_their_bound_and_not_more():
    ref = np.array([1.5], F)
    three = np.array([ref[0] + 3 * np.spacing(ref[0])], F)
    four = np.array([ref[0] + 4 * np.spacing(ref[0])], F)
    assert agreement("binary:div", three, ref).ok           # 3 ULP allowed
    assert not agreement("binary:div", four, ref).ok


def test_growth_with_x_follows_the_entry():
    ref = np.array([100.0], F)
    off = np.array([ref[0] + 20 * np.spacing(ref[0])], F)
    assert not agreement("unary:exp", off, ref, x=np.array([2.0])).ok   # 3 + 4 ULP
    assert agreement("unary:exp", off, ref, x=np.array([9.0])).ok       # 3 + 18 ULP


def test_gamma_bound_grows_with_length_and_scale():
    assert gamma(1) < gamma(10) < gamma(1000)
    ref = np.array([1.0], F)
    got = np.array([1.0 + 1e-4], F)
    assert not agreement("reduce:sum", got, ref, scale=np.array([1.0]), length=10).ok
    assert agreement("reduce:sum", got, ref, scale=np.array([100.0]), length=10000).ok


def test_flushed_subnormals_are_allowed_only_when_the_device_flushes():
    ref = np.array([1e-40, 1.0], F)
    got = np.array([0.0, 1.0], F)
    assert not agreement("unary:neg", got, ref).ok
    assert agreement("unary:neg", got, ref, flushes_subnormals=True).ok
    wrong = np.array([5e-41, 1.0], F)                         # not a flush: a wrong value
    assert not agreement("unary:neg", wrong, ref, flushes_subnormals=True).ok
    # an excused flush does not count towards the worst error against the bound
    assert agreement("unary:neg", got, ref, flushes_subnormals=True).worst == 0
    assert agreement("unary:exp", got, ref, flushes_subnormals=True).worst == 0
    assert agreement("unary:neg", wrong, ref, flushes_subnormals=True).worst > 1


def test_a_flush_just_above_flt_min_is_excused_only_within_the_bound():
    tiny = np.finfo(F).tiny
    got = np.array([0.0], F)
    near = np.array([tiny * (1 + 2 ** -20)], F)       # 8 ULP above FLT_MIN
    far = np.array([tiny * 1.01], F)
    # exp's bound at x = 87 (177 ULP) reaches below FLT_MIN from `near`, not from `far`
    assert agreement("unary:exp", got, near, x=np.array([87.0]), flushes_subnormals=True).ok
    assert not agreement("unary:exp", got, far, x=np.array([87.0]),
                         flushes_subnormals=True).ok
    assert not agreement("unary:exp", got, near, x=np.array([87.0])).ok


def test_a_pair_across_the_overflow_threshold_is_measured_from_it():
    big = np.finfo(F).max
    inf = np.array([np.inf], F)
    below = np.array([big], F)
    for _ in range(4):                                   # 4.5 ULP below the threshold
        below = np.nextafter(below, F(0))
    far = np.array([big * F(0.999)], F)
    assert agreement("unary:exp", below, inf, x=np.array([1.0])).ok       # 3 + 2 ULP
    assert agreement("unary:exp", inf, below, x=np.array([1.0])).ok
    assert not agreement("unary:exp", far, inf, x=np.array([1.0])).ok
    assert not agreement("unary:exp", -below, inf, x=np.array([1.0])).ok   # a sign apart
    assert not agreement("unary:neg", below, inf).ok                       # exact entries


def test_nan_must_match_nan_and_shapes_must_match():
    assert not agreement("unary:exp", np.array([1.0], F), np.array([np.nan], F)).ok
    assert agreement("unary:exp", np.array([np.nan], F), np.array([np.nan], F)).ok
    assert not agreement("unary:exp", np.ones(3, F), np.ones(2, F)).ok


def test_every_entry_has_a_reason():
    for key, tol in TOLERANCES.items():
        assert len(tol.reason) > 10, key
        assert tol.exact or tol.ulps or tol.atol or tol.gamma or tol.rel, key


def test_a_nan_bound_allows_nothing():
    # growth from a NaN input makes the bound NaN; a wrong result must still fail
    ref, got = np.array([1.0], F), np.array([2.0], F)
    assert not agreement("unary:exp", got, ref, x=np.array([np.nan])).ok
    assert not agreement("unary:exp", np.array([np.nan], F), ref, x=np.array([np.nan])).ok


def test_an_infinite_scale_keeps_the_ulp_bound():
    # g / a with x = inf: the scale |g * y| is inf; an entry without a relative term must
    # still allow its ULPs (a 1-ULP division difference, as NVIDIA's driver gives), not 0
    ref = np.array([1.1049356], F)
    got = np.nextafter(ref, F(2))
    scale = np.array([np.inf])
    assert agreement("unary_backward:div_scalar", got, ref, scale=scale).ok
    assert not agreement("unary_backward:div_scalar", ref + F(1e-5), ref, scale=scale).ok


def test_a_sum_past_float32s_range_agrees_whatever_its_order_gives():
    # terms whose magnitudes sum past FLT_MAX: inf, NaN (inf less inf) or a finite sum, by
    # the order of addition (and whether a fused multiply-add rounds the product first)
    ref = np.array([np.nan, np.inf, 1.0], F)
    got = np.array([np.inf, -np.inf, -np.inf], F)
    assert agreement("conv2d", got, ref, scale=np.full(3, 5e38), length=18).ok
    assert agreement("conv2d", got, ref, scale=np.full(3, np.inf), length=18).ok
    assert not agreement("conv2d", got, ref, scale=np.full(3, 3e38), length=18).ok
    assert not agreement("conv2d", got[:1], ref[:1], scale=np.array([3e38]), length=18).ok


def test_a_16_bit_result_may_be_one_unit_of_its_type_apart_and_no_more():
    x = np.zeros(3)
    ref = np.array([1.0, 1.0, 0.99609375], F)            # bfloat16 values, and a neighbour
    assert agreement("unary:exp@bfloat16", np.array([1.0078125, 0.99609375, 1.0], F), ref,
                     x=x).ok
    assert not agreement("unary:exp", np.array([1.0078125], F), ref[:1], x=x[:1]).ok
    assert not agreement("unary:exp@bfloat16", np.array([1.015625], F), ref[:1], x=x[:1]).ok
    # an exact entry stays exact: the same float32 value rounds alike on both
    assert not agreement("binary:add@float16", np.array([1.0009765625], F),
                         np.array([1.0], F)).ok
    # past float16's largest value (65504) a result rounds to inf on one side only
    big = np.array([65504.0], F)
    assert agreement("unary:exp@float16", np.array([np.inf], F), big, x=x[:1]).ok
    assert not agreement("unary:exp@float16", np.array([np.inf], F), big / 2, x=x[:1]).ok
    assert TOLERANCES["unary:exp@float16"].describe().endswith("1 ULP of float16")


def test_every_entry_describes_its_bound():
    assert TOLERANCES["binary:add"].describe() == "exact"
    assert TOLERANCES["unary:exp"].describe() == "3 ULP + 2*|x| ULP"
    assert "gamma(n)" in TOLERANCES["matmul"].describe()
    assert all(t.describe() and t.reason for t in TOLERANCES.values())


# -- the exported strategies reach the cases they promise -------------------------------------
from hypothesis import find, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dualgrad.testing import strategies as dgst  # noqa: E402


@pytest.mark.parametrize("name,predicate", [
    ("0-d", lambda s: s == ()),
    ("0 elements", lambda s: len(s) > 0 and 0 in s),
    ("1 element", lambda s: len(s) > 0 and int(np.prod(s)) == 1),
    ("4-d", lambda s: len(s) == 4 and int(np.prod(s)) > 1),
    ("a workgroup edge", lambda s: any(d in (255, 257, 4097) for d in s)),
])
def test_shapes_reach(name, predicate):
    assert predicate(find(dgst.shapes(), predicate, settings=settings(max_examples=2000)))


def test_shapes_respect_their_limits():
    @given(dgst.shapes(min_dims=1, max_dims=3, max_size=5000))
    @settings(max_examples=100)
    def check(shape):
        assert 1 <= len(shape) <= 3 and int(np.prod(shape)) <= 5000
    check()


@pytest.mark.parametrize("name,predicate", [
    ("equal", lambda p: p[0] == p[1] and len(p[0]) > 1),
    ("0-d against n-d", lambda p: p[0] == () and len(p[1]) >= 2),
    ("missing leading axes", lambda p: 0 < len(p[0]) < len(p[1])),
    ("1-sides on both", lambda p: len(p[0]) == len(p[1]) >= 2 and 1 in p[0] and 1 in p[1]
     and p[0] != p[1]),
])
def test_broadcast_pairs_reach(name, predicate):
    pair = find(dgst.broadcast_pairs(), predicate, settings=settings(max_examples=2000))
    assert predicate(pair)
    np.broadcast_shapes(*pair)                       # they do broadcast


@pytest.mark.parametrize("value", [-0.0, 1e-40, float("inf"), float("nan"), 3.4028235e38])
def test_arrays_carry_special_values(value):
    def has(a):
        return bool(np.any(np.isnan(a))) if np.isnan(value) else bool(
            np.any((a == value) & (np.signbit(a) == np.signbit(value))))
    a = find(dgst.arrays((50,), specials=dgst.ALL_SPECIALS), has,
             settings=settings(max_examples=2000))
    assert a.dtype == np.float32 and has(a)


def test_arrays_stay_in_range_without_specials():
    @given(dgst.arrays(dgst.shapes(max_size=3000), -2.0, 0.5))
    @settings(max_examples=60)
    def check(a):
        assert a.dtype == np.float32 and np.all((a >= -2.0) & (a <= 0.5))
    check()


def test_index_arrays_are_in_range():
    @given(st.integers(1, 20).flatmap(lambda n: st.tuples(st.just(n),
                                                          dgst.index_arrays((7, 3), n))))
    @settings(max_examples=40)
    def check(case):
        n, idx = case
        assert idx.shape == (7, 3) and idx.min() >= 0 and idx.max() < n
    check()
