"""Products with NumPy's BLAS held to one thread, big ones cut across the cores
(dualgrad/cpu/blas.py): the bits of the parts BLAS makes (those of the uncut product where
BLAS sums alike whatever the cut), every call made with BLAS on one thread, and BLAS's
thread count restored after."""
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from dualgrad.cpu import blas, matmul, split


def blas_threads() -> list:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_numpys_blas_can_be_held():
    assert blas.can_hold(), "threadpoolctl found no BLAS library under NumPy"


def test_one_thread_holds_nested_and_restores():
    before = blas_threads()
    with blas.one_thread():
        assert set(blas_threads()) == {1}
        with blas.one_thread():
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}, "an inner hold let go of the outer's"
    assert blas_threads() == before


def test_a_hold_is_released_when_the_body_raises():
    before = blas_threads()
    with pytest.raises(KeyError):
        with blas.one_thread():
            raise KeyError("x")
    assert blas_threads() == before


def spy_parts(monkeypatch):
    """Records (the parts' ranges, BLAS's thread counts seen inside a part)."""
    seen, lock, run = [], threading.Lock(), split.run_ranges

    def recording(fn, ranges, **kwargs):
        def part(lo, hi):
            with lock:
                seen.append(((lo, hi), tuple(blas_threads())))
            fn(lo, hi)
        run(part, ranges, **kwargs)
    monkeypatch.setattr(split, "run_ranges", recording)
    return seen


RNG = np.random.default_rng(5)
CASES = {   # a and b (shapes; "T" a transposed view), how the product is cut
    "rows of the bigger a": ((96, 40), (40, 24), "rows"),
    "columns of the bigger b": ((24, 40), (40, 96), "columns"),
    "rows of a transposed a": ((40, 96, "T"), (40, 24), "rows"),
    "the batch": ((6, 16, 40), (6, 40, 24), "batch"),
    "the batch of a shared a": ((16, 40), (6, 40, 24), "batch"),
    "a batch's rows against one b": ((6, 16, 40), (40, 24), "rows of all"),
}


def operand(shape):
    if shape[-1] == "T":
        return RNG.standard_normal(shape[:-1]).astype(np.float32).T
    return RNG.standard_normal(shape).astype(np.float32)


def blas_parts(a, b, axis, ranges):
    """np.matmul of each part of a product cut at ``ranges`` along ``axis``, put together."""
    if axis == "rows":
        return np.concatenate([np.matmul(a[lo:hi], b) for lo, hi in ranges])
    if axis == "columns":
        return np.concatenate([np.matmul(a, b[:, lo:hi]) for lo, hi in ranges], axis=1)
    if axis == "batch":
        return np.concatenate([np.matmul(a if a.ndim == 2 else a[lo:hi], b[lo:hi])
                               for lo, hi in ranges])
    rows = a.reshape(-1, a.shape[-1])                   # "rows of all"
    return np.concatenate([np.matmul(rows[lo:hi], b) for lo, hi in ranges]).reshape(
        *a.shape[:-1], b.shape[-1])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("cores", [2, 3])
def test_cut_products_give_the_bits_of_blas_on_their_parts(monkeypatch, case, cores):
    a_shape, b_shape, axis = CASES[case]
    a, b = operand(a_shape), operand(b_shape)
    want = np.matmul(a, b)
    monkeypatch.setattr(blas, "CUT_MIN", 1)
    monkeypatch.setattr(split, "cores", lambda: cores)
    monkeypatch.setattr(split, "busy", lambda: True)
    seen = spy_parts(monkeypatch)
    before = blas_threads()
    got = matmul.matmul(a, b)
    with blas.one_thread():
        parts = blas_parts(a, b, axis, sorted(r for r, _ in seen))
    # the parts' own bits, which are the uncut product's where BLAS sums each element of a
    # part as it does whole (OpenBLAS's AVX-512 kernels; not its Haswell kernels of 0.3.31,
    # whose sums move with the cut)
    np.testing.assert_array_equal(got, parts)
    if np.array_equal(parts, want):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(seen) == cores
    assert all(threads and set(threads) == {1} for _, threads in seen)
    assert blas_threads() == before
    length = {"rows": want.shape[-2], "columns": want.shape[-1], "batch": want.shape[0],
              "rows of all": want.shape[0] * want.shape[1]}[axis]
    assert sorted(r for r, _ in seen) == split.even(length, cores)


def spy_matmul(monkeypatch) -> list:
    """BLAS's thread counts seen by each np.matmul call."""
    inside, matmul_ = [], np.matmul

    def spy(*args, **kwargs):
        inside.append(tuple(blas_threads()))
        return matmul_(*args, **kwargs)
    monkeypatch.setattr(np, "matmul", spy)
    return inside


def test_small_products_run_whole_on_one_blas_thread(monkeypatch):
    monkeypatch.setattr(split, "busy", lambda: True)
    seen, inside = spy_parts(monkeypatch), spy_matmul(monkeypatch)
    a, b = operand((8, 8)), operand((8, 8))
    assert 8 ** 3 < blas.CUT_MIN
    np.testing.assert_array_equal(matmul.matmul(a, b), a @ b)
    assert seen == [] and len(inside) == 1 and set(inside[0]) == {1}


def test_products_keep_blass_threads_while_the_pool_is_idle(monkeypatch):
    monkeypatch.setattr(blas, "CUT_MIN", 1)
    monkeypatch.setattr(split, "busy", lambda: False)
    before = blas_threads()
    seen, inside = spy_parts(monkeypatch), spy_matmul(monkeypatch)
    a, b = operand((96, 40)), operand((40, 24))
    np.testing.assert_array_equal(matmul.matmul(a, b), a @ b)
    assert seen == [] and inside == [tuple(before)]


def test_the_pool_is_busy_after_a_kernel_on_every_core_not_after_a_product(monkeypatch):
    monkeypatch.setattr(split, "cores", lambda: 2)
    monkeypatch.setattr(split, "_last_on_every_core", -float("inf"))
    split.run_ranges(lambda lo, hi: None, [(0, 1), (1, 2)], busy=False)
    assert not split.busy()
    split.run_ranges(lambda lo, hi: None, [(0, 1)])          # (one range: this thread)
    assert not split.busy()
    split.run_ranges(lambda lo, hi: None, [(0, 1), (1, 2)])
    assert split.busy()
    monkeypatch.setattr(split, "BUSY_SECONDS", 0.0)
    assert not split.busy()


@pytest.mark.parametrize("busy", [False, True])
@pytest.mark.parametrize("a_shape, b_shape", [((0, 3, 4), (4, 5)), ((2, 3, 0), (0, 5)),
                                              ((2, 3, 4), (4, 0)), ((0, 4), (4, 5))])
def test_empty_products(monkeypatch, busy, a_shape, b_shape):
    monkeypatch.setattr(blas, "CUT_MIN", 1)
    monkeypatch.setattr(split, "busy", lambda: busy)
    a, b = operand(a_shape), operand(b_shape)
    got = matmul.matmul(a, b)
    np.testing.assert_array_equal(got, np.matmul(a, b))
    assert got.shape == np.matmul(a, b).shape
