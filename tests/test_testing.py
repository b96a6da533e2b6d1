"""The comparison the differential tests rely on must itself be able to fail."""
import numpy as np

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


def test_nan_must_match_nan_and_shapes_must_match():
    assert not agreement("unary:exp", np.array([1.0], F), np.array([np.nan], F)).ok
    assert agreement("unary:exp", np.array([np.nan], F), np.array([np.nan], F)).ok
    assert not agreement("unary:exp", np.ones(3, F), np.ones(2, F)).ok


def test_every_entry_has_a_reason():
    for key, tol in TOLERANCES.items():
        assert len(tol.reason) > 10, key
        assert tol.exact or tol.ulps or tol.atol or tol.gamma or tol.rel, key
