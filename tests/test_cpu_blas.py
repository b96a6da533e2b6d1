"""Products with NumPy's BLAS held to one thread, big ones cut across the cores
(dualgrad/cpu/blas.py): the bits of the uncut product, every call made with BLAS on one
thread, and BLAS's thread count restored after."""
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

    def recording(fn, ranges):
        def part(lo, hi):
            with lock:
                seen.append(((lo, hi), tuple(blas_threads())))
            fn(lo, hi)
        run(part, ranges)
    monkeypatch.setattr(split, "run_ranges", recording)
    return seen


RNG = np.random.default_rng(5)
CASES = {   # a and b (shapes; "T" a transposed view), how the product is cut
    "rows of the bigger a": ((96, 40), (40, 24), "rows"),
    "columns of the bigger b": ((24, 40), (40, 96), "columns"),
    "rows of a transposed a": ((40, 96, "T"), (40, 24), "rows"),
    "the batch": ((6, 16, 40), (6, 40, 24), "batch"),
    "the batch of a shared a": ((16, 40), (6, 40, 24), "batch"),
}


def operand(shape):
    if shape[-1] == "T":
        return RNG.standard_normal(shape[:-1]).astype(np.float32).T
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("cores", [2, 3])
def test_cut_products_give_the_bits_of_the_uncut_one(monkeypatch, case, cores):
    a_shape, b_shape, axis = CASES[case]
    a, b = operand(a_shape), operand(b_shape)
    want = np.matmul(a, b)
    monkeypatch.setattr(blas, "CUT_MIN", 1)
    monkeypatch.setattr(split, "cores", lambda: cores)
    seen = spy_parts(monkeypatch)
    before = blas_threads()
    got = matmul.matmul(a, b)
    np.testing.assert_array_equal(got, want)
    assert len(seen) == cores
    assert all(threads and set(threads) == {1} for _, threads in seen)
    assert blas_threads() == before
    length = {"rows": want.shape[-2], "columns": want.shape[-1], "batch": want.shape[0]}[axis]
    assert sorted(r for r, _ in seen) == blas._parts(length, cores)


def test_small_products_run_whole_on_one_blas_thread(monkeypatch):
    seen, inside, matmul_ = spy_parts(monkeypatch), [], np.matmul

    def spy(*args, **kwargs):
        inside.append(tuple(blas_threads()))
        return matmul_(*args, **kwargs)
    monkeypatch.setattr(np, "matmul", spy)
    a, b = operand((8, 8)), operand((8, 8))
    assert 8 ** 3 < blas.CUT_MIN
    np.testing.assert_array_equal(matmul.matmul(a, b), a @ b)
    assert seen == [] and len(inside) == 1 and set(inside[0]) == {1}
