"""Order statistics and NaN-aware reductions (dualgrad/api/statistics.py) on both backends:
each against its definition in NumPy, with PyTorch's choices where they differ (the lower
median, NaN propagation, the first NaN's index), gradients included."""
from __future__ import annotations

import numpy as np
import pytest

import dualgrad as dg

NAN = float("nan")
X = np.array([[3., NAN, 1., 2.], [4., 1., 2., 3.], [NAN, 5, NAN, 0]], np.float32)
Y = np.random.default_rng(21).standard_normal((3, 7)).astype(np.float32)


def test_median_is_the_lower_middle_and_propagates_nan(device):
    values, indices = dg.median(dg.ag_tensor(X), 1)
    np.testing.assert_array_equal(values.numpy(), [NAN, 2.0, NAN])
    np.testing.assert_array_equal(indices.numpy(), [1, 2, 0])     # a NaN line: its first NaN
    assert np.isnan(dg.median(dg.ag_tensor(X)).item())
    assert dg.median(dg.ag_tensor(X[1])).item() == 2.0              # of 1, 2, 3, 4: the lower
    v, i = dg.median(dg.ag_tensor(Y), 0, keepdim=True)
    want = np.sort(Y, 0)[1:2]
    np.testing.assert_array_equal(v.numpy(), want)
    np.testing.assert_array_equal(np.take_along_axis(Y, i.numpy(), 0), want)


def test_nanmedian_and_kthvalue(device):
    values, indices = dg.nanmedian(dg.ag_tensor(X), 1)
    np.testing.assert_array_equal(values.numpy(), [2.0, 2.0, 0.0])
    np.testing.assert_array_equal(indices.numpy(), [3, 2, 3])
    assert dg.nanmedian(dg.ag_tensor(X)).item() == 2.0
    assert np.isnan(dg.nanmedian(dg.ag_tensor(np.full(3, NAN, np.float32))).item())
    v, i = dg.kthvalue(dg.ag_tensor(X), 2, 1)
    np.testing.assert_array_equal(v.numpy(), [2.0, 2.0, 5.0])       # NaNs count as largest
    np.testing.assert_array_equal(i.numpy(), [3, 2, 1])
    with pytest.raises(dg.InvalidValueError, match=r"^kthvalue: argument 'k'"):
        dg.kthvalue(dg.ag_tensor(X), 5, 1)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_as_numpy(device, interpolation):
    q = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    got = dg.quantile(dg.ag_tensor(Y), q, 1, interpolation=interpolation)
    want = np.quantile(Y.astype(np.float64), q, axis=1, method=interpolation)
    # (the positions q (n - 1) in float32, as PyTorch's; a lerp of two float32 values)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=4e-7 * np.abs(Y).max())
    assert got.shape == (5, 3)


def test_quantile_shapes_and_nan(device):
    t = dg.ag_tensor(Y)
    assert dg.quantile(t, 0.3).shape == () and dg.quantile(t, 0.3, keepdim=True).shape == (1, 1)
    assert dg.quantile(t, [0.2, 0.4], 0, keepdim=True).shape == (2, 1, 7)
    got = dg.quantile(dg.ag_tensor(X), 0.5, 1).numpy()
    assert np.isnan(got[0]) and got[1] == 2.5 and np.isnan(got[2])
    with pytest.raises(dg.InvalidValueError, match=r"^quantile: argument 'q'"):
        dg.quantile(t, 1.5)
    with pytest.raises(dg.InvalidValueError, match=r"^quantile: argument 'interpolation'"):
        dg.quantile(t, 0.5, interpolation="cubic")
    with pytest.raises(dg.InvalidValueError, match=r"^quantile: argument 'input' has no"):
        dg.quantile(dg.zeros(0), 0.5)


def test_order_statistics_pass_gradients_to_the_chosen_elements(device):
    t = dg.ag_tensor(Y, requires_grad=True)
    with dg.with_grad_tape():
        v, i = dg.median(t, 1)
        dg.sum(v).backward()
    want = np.zeros_like(Y)
    np.put_along_axis(want, i.numpy()[:, None], 1.0, 1)
    np.testing.assert_array_equal(t.grad.numpy(), want)
    assert dg.gradcheck(lambda a: dg.quantile(a, [0.25, 0.6], 1), Y.astype(np.float64))
    assert dg.gradcheck(lambda a: dg.kthvalue(a, 3, 0).values, Y.astype(np.float64))


def test_nan_reductions_count_and_aminmax(device):
    t = dg.ag_tensor(X)
    np.testing.assert_array_equal(dg.nansum(t, 1).numpy(), np.nansum(X, 1))
    np.testing.assert_allclose(dg.nanmean(t, 0).numpy(), np.nanmean(X, 0), rtol=1e-7)
    assert dg.nansum(t).item() == np.nansum(X)
    counts = dg.count_nonzero(dg.ag_tensor(np.array([[0, 1.], [2, 0], [3, 4]])), 0)
    assert counts.dtype == np.int32
    np.testing.assert_array_equal(counts.numpy(), [2, 2])
    assert dg.count_nonzero(dg.ag_tensor(np.array([0, -0.0, NAN, 1]))).item() == 2
    lo, hi = dg.aminmax(dg.ag_tensor(Y), dim=0, keepdim=True)
    np.testing.assert_array_equal(lo.numpy(), Y.min(0, keepdims=True))
    np.testing.assert_array_equal(hi.numpy(), Y.max(0, keepdims=True))


def test_diff_as_numpy(device):
    t = dg.ag_tensor(Y, requires_grad=True)
    with dg.with_grad_tape():
        d = dg.diff(t, 2, 1, prepend=np.zeros((3, 1), np.float32))
        dg.sum(d).backward()
    np.testing.assert_array_equal(d.numpy(), np.diff(Y, 2, 1, prepend=np.zeros((3, 1), np.float32)))
    assert dg.diff(t, 0).shape == Y.shape and dg.diff(t[:, :1], 3, 1).shape == (3, 0)
    assert dg.gradcheck(lambda a: dg.diff(a, 1, 0, append=a[:1]), Y.astype(np.float64))


def test_take_along_dim_masked_select_and_nonzero(device):
    t = dg.ag_tensor(X)
    idx = np.array([[0, 2], [1, 1], [3, 0]])
    np.testing.assert_array_equal(dg.take_along_dim(t, idx, 1).numpy(),
                                  np.take_along_axis(X, idx, 1))
    rows = np.array([[1], [0]])                                  # broadcast along axis 1
    np.testing.assert_array_equal(dg.take_along_dim(t, rows, 0).numpy(),
                                  np.take_along_axis(X, np.broadcast_to(rows, (2, 4)), 0))
    np.testing.assert_array_equal(dg.take_along_dim(t, np.array([1, 5])).numpy(),
                                  X.reshape(-1)[[1, 5]])
    mask = np.array([True, False, True, False])
    np.testing.assert_array_equal(dg.masked_select(t, mask).numpy(),
                                  np.broadcast_to(X, (3, 4))[np.broadcast_to(mask, (3, 4))])
    found = dg.nonzero(dg.ag_tensor(Y > 0))
    assert found.dtype == np.int32
    np.testing.assert_array_equal(found.numpy(), np.argwhere(Y > 0))
    rows, cols = dg.ag_tensor(Y).nonzero(as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), np.nonzero(Y)[0])
    np.testing.assert_array_equal(dg.argwhere(dg.ag_tensor(Y)).numpy(), np.argwhere(Y))
    with pytest.raises(dg.ShapeError, match=r"^take_along_dim: argument 'indices'"):
        dg.take_along_dim(t, np.array([0, 1]), 1)
    with pytest.raises(dg.InvalidValueError, match=r"^masked_select: argument 'mask'"):
        dg.masked_select(t, np.array([1, 0, 1, 0]))


def test_where_of_a_condition_alone_gives_its_indices(device):
    mask = Y > 0
    rows, cols = dg.where(dg.ag_tensor(mask))
    want = np.nonzero(mask)
    np.testing.assert_array_equal(rows.numpy(), want[0])
    np.testing.assert_array_equal(cols.numpy(), want[1])
    with pytest.raises(dg.ArgumentTypeError, match=r"^where: give both"):
        dg.where(dg.ag_tensor(mask), 1.0)


def test_unique_and_bincount_as_numpy(device):
    x = np.array([[3, 1, 3], [2, 1, 2]])
    values, inverse, counts = dg.unique(dg.tensor(x), return_inverse=True, return_counts=True)
    want = np.unique(x, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), want[0])
    np.testing.assert_array_equal(inverse.numpy(), want[1].reshape(x.shape))
    np.testing.assert_array_equal(counts.numpy(), want[2])
    assert values.dtype == np.int32 and dg.unique(dg.ag_tensor(Y)).dtype == dg.float32
    columns = dg.unique(dg.tensor(x), dim=1)
    np.testing.assert_array_equal(columns.numpy(), np.unique(x, axis=1))
    np.testing.assert_array_equal(dg.bincount(np.array([0, 2, 2, 5]), minlength=7).numpy(),
                                  [1, 0, 2, 0, 0, 1, 0])
    weights = dg.ag_tensor(np.array([0.5, 1, 2, 3], np.float32), requires_grad=True)
    with dg.with_grad_tape():
        sums = dg.bincount(np.array([0, 2, 2, 5]), weights)
        dg.sum(sums * dg.ag_tensor(np.arange(6, dtype=np.float32))).backward()
    np.testing.assert_array_equal(sums.numpy(), [0.5, 0, 3, 0, 0, 3])
    np.testing.assert_array_equal(weights.grad.numpy(), [0, 2, 2, 5])     # each weight's bin
    with pytest.raises(dg.InvalidValueError, match=r"^bincount: argument 'input'"):
        dg.bincount(np.array([1, -1]))
