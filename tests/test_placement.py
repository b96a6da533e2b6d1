"""index_fill, index_copy and scatter against NumPy on both backends: the positions written,
the last value of a repeated position winning, every dtype, gradients to the kept elements
and to the values written, and errors raised before anything is computed."""
import numpy as np
import pytest

import dualgrad as dg

A = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)


def t(a, **kw):
    return dg.ag_tensor(a, **kw)


def test_index_fill_sets_whole_slices(device):
    got = dg.index_fill(t(A), 1, [2, 0], -1.0).numpy()
    want = A.copy()
    want[:, [2, 0]] = -1.0
    np.testing.assert_array_equal(got, want)
    ints = t(A, dtype="int32").index_fill(2, dg.tensor([3]), dg.tensor(7))
    assert ints.dtype == np.int32 and ints.numpy()[:, :, 3].tolist() == [[7] * 3] * 2


def test_index_copy_writes_slices_the_last_of_a_repeat_winning(device):
    source = -np.arange(8.0, dtype=np.float32).reshape(2, 1, 4) * np.ones((1, 2, 1),
                                                                           np.float32)
    source[:, 1] -= 100
    got = dg.index_copy(t(A), 1, [0, 0], t(source)).numpy()
    want = A.copy()
    want[:, 0] = source[:, 1]                        # (the last slice for position 0)
    np.testing.assert_array_equal(got, want)
    flags = dg.tensor([True, False, True]).index_copy(0, [1], dg.tensor([True]))
    assert flags.numpy().tolist() == [True, True, True]


def test_scatter_writes_elements_and_values_as_pytorchs(device):
    x = np.zeros((3, 5), np.float32)
    index = np.array([[0, 4], [1, 1], [2, 0]])
    src = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3)  # (larger than index)
    got = dg.scatter(t(x), 1, index, t(src)).numpy()
    want = x.copy()
    for i in range(3):
        for j in range(2):
            want[i, index[i, j]] = src[i, j]               # (row 1: the last, 5, wins)
    np.testing.assert_array_equal(got, want)
    assert got[1, 1] == 5.0
    filled = t(x).scatter(0, np.array([[2, 0, 1]]), 2.5).numpy()
    assert filled[2, 0] == filled[0, 1] == filled[1, 2] == 2.5 and filled.sum() == 7.5
    assert dg.scatter(t(x), 0, np.array([[1]]), value=-1.0).numpy()[1, 0] == -1.0
    ints = dg.scatter(dg.zeros(4, dtype="int32"), 0, dg.tensor([3, 1]), dg.tensor([7, 9]))
    assert ints.numpy().tolist() == [0, 9, 0, 7]


def test_gradients_reach_the_kept_elements_and_the_values_written(rng):
    x = rng.standard_normal((3, 4))
    assert dg.gradcheck(lambda v: dg.index_fill(v, 1, [1, 3], 0.5) * v, x)
    assert dg.gradcheck(lambda v, s: dg.index_copy(v, 0, [2, 0, 2], s),
                        (x, rng.standard_normal((3, 4))))
    assert dg.gradcheck(lambda v, s: dg.scatter(v, 1, np.array([[3, 0], [1, 1], [2, 2]]), s),
                        (x, rng.standard_normal((3, 2))))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda x: dg.index_fill(x, 1, [3], 0.0), dg.IndexOutOfRange,
     r"^index_fill: index 3 is out of range for dim 1 of size 3"),
    (lambda x: dg.index_fill(x, 1, [0], dg.ones(2)), dg.ShapeError,
     r"^index_fill: argument 'value'"),
    (lambda x: dg.index_copy(x, 2, [0, 1], x), dg.ShapeError, r"^index_copy: argument 'source'"),
    (lambda x: dg.index_copy(x, 3, [0], x), dg.AxisOutOfRange, r"^index_copy: argument 'dim'"),
    (lambda x: dg.scatter(x, 1, np.zeros((2, 3, 4), int), x, value=1.0), dg.InvalidValueError,
     r"^scatter: expected src \(a tensor\) or value"),
    (lambda x: dg.scatter(x, 1, np.zeros((2, 3), int), x), dg.ShapeError,
     r"^scatter: argument 'index'"),
    (lambda x: dg.scatter(x, 1, np.zeros((3, 3, 4), int), x), dg.ShapeError,
     r"^scatter: argument 'index'"),
    (lambda x: dg.scatter(x, 0, np.zeros((3, 3, 4), int), x), dg.ShapeError,
     r"^scatter: argument 'src'"),
    (lambda x: dg.scatter(x, 1, np.full((2, 1, 1), 5), x), dg.IndexOutOfRange,
     r"^scatter: index 5 is out of range"),
    (lambda x: dg.scatter(x, 1, np.zeros((2, 3, 4), int), x[:, :, :2]), dg.ShapeError,
     r"^scatter: argument 'src'"),
    (lambda x: dg.index_fill(x, 0, np.array([0.5]), 1.0), dg.ArgumentTypeError,
     r"^index_fill: argument 'index'"),
])
def test_bad_arguments_are_named(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(t(A))
