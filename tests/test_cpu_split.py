"""Big elementwise kernels cut across the cores (dualgrad/cpu/split.py): the parts cover
the arrays exactly once, errors come back to the caller, and the results are the bits of
one uncut call."""
import threading

import numpy as np
import pytest

from dualgrad.cpu import binary, split, unary
from dualgrad.kernel_ops import BINARY, UNARY


def record_parts(monkeypatch, n, cores):
    monkeypatch.setattr(split, "cores", lambda: cores)
    seen, lock = [], threading.Lock()

    def kernel(x, out, scale):
        with lock:
            seen.append((int(x[0]), x.size, threading.get_ident()))
        out[:] = x * scale
    x = np.arange(n, dtype=np.float64)
    out = np.empty_like(x)
    split.run(kernel, (x, out), 2.0)
    return x, out, sorted(seen)


@pytest.mark.parametrize("n,cores,parts", [(split.SPLIT_MIN - 1, 4, 1), (split.SPLIT_MIN, 1, 1),
                                           (split.SPLIT_MIN, 4, 2), (3 * split.SPLIT_MIN + 7, 4, 4),
                                           (40 * split.SPLIT_MIN, 64, split.MAX_PARTS)])
def test_parts_cover_the_arrays_once(monkeypatch, n, cores, parts):
    x, out, seen = record_parts(monkeypatch, n, cores)
    assert len(seen) == (parts if parts == 1 else parts * split.PIECES)   # (taken in turn)
    starts = [s for s, _, _ in seen]
    assert starts[0] == 0 and sum(size for _, size, _ in seen) == n
    assert all(a + size == b for (a, size, _), b in zip(seen, starts[1:]))
    np.testing.assert_array_equal(out, 2.0 * x)


def test_an_error_in_any_part_reaches_the_caller(monkeypatch):
    monkeypatch.setattr(split, "cores", lambda: 2)

    def kernel(x):
        if x[0] != 0:
            raise FloatingPointError("second part")
    with pytest.raises(FloatingPointError, match="second part"):
        split.run(kernel, (np.arange(2 * split.SPLIT_MIN, dtype=np.float64),))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cut_kernels_give_the_bits_of_one_call(monkeypatch, dtype):
    monkeypatch.setattr(split, "cores", lambda: 3)
    rng = np.random.default_rng(0)
    n = split.SPLIT_MIN + 5
    x = (rng.standard_normal(n) * 4).astype(dtype)
    y = (rng.standard_normal(n) * 4).astype(dtype)
    g = rng.standard_normal(n).astype(dtype)
    for op in ("exp", "tanh", "gelu", "relu"):
        whole = np.empty_like(x)
        unary.KERNELS[UNARY[op].code](x, whole, 0.0, 0.0)
        if UNARY[op].code in unary.F32_KERNELS and dtype == np.float32:
            unary.F32_KERNELS[UNARY[op].code](x, whole)
        got = unary.unary(op, x)
        assert np.array_equal(got.view(np.uint8), whole.view(np.uint8)), op
        grad = np.empty_like(x)
        unary.GRAD_KERNELS[UNARY[op].code](x, got, g, grad, 0.0, 0.0)
        if UNARY[op].code in unary.GRAD_F32_KERNELS and dtype == np.float32:
            unary.GRAD_F32_KERNELS[UNARY[op].code](x, got, g, grad)
        assert np.array_equal(unary.unary_backward(op, x, got, g).view(np.uint8),
                              grad.view(np.uint8)), op
    for op in ("add", "mul", "div", "pow"):
        whole = np.empty_like(x)
        binary._BINARY[BINARY[op].code][0](x, y, whole)
        got = binary.binary(op, x, y)
        assert np.array_equal(got.view(np.uint8), whole.view(np.uint8)), op


@pytest.mark.parametrize("work,count,cores,pieces", [
    (split.SPLIT_MIN - 1, 100, 4, 1), (split.SPLIT_MIN, 100, 1, 1),
    (split.SPLIT_MIN, 9, 4, 2 * split.PIECES), (8 * split.SPLIT_MIN, 3, 8, 3),
    (64 * split.SPLIT_MIN, 1000, 64, split.MAX_PARTS * split.PIECES)])
def test_cuts_cover_a_range_once(monkeypatch, work, count, cores, pieces):
    monkeypatch.setattr(split, "cores", lambda: cores)
    got = split.cuts(count, work)
    assert len(got) == pieces and got[0][0] == 0 and got[-1][1] == count
    assert all(hi == lo for (_, hi), (lo, _) in zip(got, got[1:]))
    assert all(hi > lo for lo, hi in got)


@pytest.mark.parametrize("y_shape", [(1, 16, 1, 1), (8, 1, 128, 128), (8, 16, 1, 128)])
def test_broadcast_binary_ops_cut_by_rows_give_the_bits_of_one_call(monkeypatch, y_shape):
    """A broadcast operand (a channel's bias, a mask per image, a row) against 2M elements:
    the rows of the walk cut across the cores, each part the same bits as NumPy's."""
    monkeypatch.setattr(split, "cores", lambda: 3)
    calls = []
    ranges = split.run_ranges
    monkeypatch.setattr(split, "run_ranges", lambda fn, r: (calls.append(r), ranges(fn, r)))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 16, 128, 128)).astype(np.float32)
    y = rng.standard_normal(y_shape).astype(np.float32)
    for got, want in ((binary.binary("add", x, y), x + y), (binary.binary("sub", y, x), y - x),
                      (binary.binary("mul", x, y), x * y)):
        assert np.array_equal(got, want)
    assert calls and all(len(r) == 3 * split.PIECES for r in calls)


# Forking a process that has threads is the case under test (Python 3.12 warns about it).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_forked_child_splits_with_threads_of_its_own(monkeypatch):
    import multiprocessing
    monkeypatch.setattr(split, "cores", lambda: 2)
    x = np.ones(2 * split.SPLIT_MIN, np.float32)
    unary.unary("exp", x)                         # the parent's pool exists
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        total = pool.apply_async(_child_sum_of_exp, (x,)).get(timeout=120)
    assert total == pytest.approx(np.e * x.size, rel=1e-6)


def _child_sum_of_exp(x):
    return float(np.sum(unary.unary("exp", x), dtype=np.float64))


def test_ranges_run_once_each(monkeypatch):
    monkeypatch.setattr(split, "cores", lambda: 3)
    seen, lock = [], threading.Lock()

    def record(lo, hi):
        with lock:
            seen.append((lo, hi, threading.current_thread() is threading.main_thread()))
    ranges = [(k, k + 1) for k in range(40)]
    split.run_ranges(record, ranges)
    assert sorted((lo, hi) for lo, hi, _ in seen) == ranges


def test_a_part_may_cut_its_own_work(monkeypatch):
    """run_ranges called inside a part (a convolution's band making a big product) runs
    that part's ranges on its own thread: every pool thread may be busy with a part."""
    monkeypatch.setattr(split, "cores", lambda: 2)
    seen, lock = [], threading.Lock()

    def inner(lo, hi):
        with lock:
            seen.append((lo, hi))

    def outer(lo, hi):
        split.run_ranges(inner, [(10 * lo + k, 10 * lo + k + 1) for k in range(3)])
    runner = threading.Thread(target=split.run_ranges,
                              args=(outer, [(k, k + 1) for k in range(4)]), daemon=True)
    runner.start()
    runner.join(timeout=20)
    assert not runner.is_alive(), "a part waiting on the pool never returned"
    assert sorted(seen) == [(10 * o + k, 10 * o + k + 1) for o in range(4) for k in range(3)]


def test_a_slow_thread_takes_fewer_ranges(monkeypatch):
    """Ranges are taken in turn: a thread that is slowed (its core shared) does fewer, the
    others more, instead of everyone waiting on its fixed share."""
    import time
    monkeypatch.setattr(split, "cores", lambda: 2)
    done, lock = {}, threading.Lock()

    def work(lo, hi):
        main = threading.current_thread() is threading.main_thread()
        time.sleep(0.02 if main else 0.002)
        with lock:
            done[main] = done.get(main, 0) + 1
    split.run_ranges(work, [(k, k + 1) for k in range(24)])
    assert sum(done.values()) == 24 and done.get(False, 0) > 2 * done.get(True, 0)


def test_a_failing_range_raises_in_the_caller():
    def fail(lo, hi):
        if lo:
            raise ValueError(f"range {lo}")
    with pytest.raises(ValueError, match="range 3"):
        split.run_ranges(fail, [(0, 3), (3, 6)])
