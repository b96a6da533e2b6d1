"""sort, argsort and topk against a plain stable sort on both backends (NaN, signed zeros,
ties, int32 and bool tensors, rows longer than the device's shared-memory block), their
gradients, a captured step, and bad arguments; searchsorted and bucketize against NumPy's
searchsorted."""
import math

import numpy as np
import pytest

import dualgrad as dg
from conftest import assert_layer_step_replays

RNG = np.random.default_rng(11)
X = RNG.integers(-3, 4, (4, 5, 6)).astype(np.float32)        # many ties
X[0, 0, :3] = np.nan
X[1, 1, 1] = -0.0
X[2, 3, 4] = -np.inf
X[3, 2, 0] = np.inf


def stable_order(line, descending):
    """Indices sorting ``line`` stably, NaN past every number (first when descending)."""
    def key(i):
        v = float(line[i])
        if math.isnan(v):
            return (1, 0.0) if not descending else (0, 0.0)
        return (0, v) if not descending else (1, -v)
    return sorted(range(len(line)), key=key)


def reference(x, dim, descending):
    moved = np.moveaxis(x, dim, -1)
    order = np.apply_along_axis(lambda line: np.array(stable_order(line, descending)), -1,
                                moved).astype(np.int64) if moved.shape[-1] else \
        np.zeros(moved.shape, np.int64)
    values = np.take_along_axis(moved, order, -1)
    return np.moveaxis(values, -1, dim), np.moveaxis(order, -1, dim)


def same_bits(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(np.ascontiguousarray(got).view(np.uint32),
                          np.ascontiguousarray(want).view(np.uint32))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_with_nan_signed_zeros_and_infinities(device, dim, descending):
    values, indices = dg.sort(dg.ag_tensor(X), dim=dim, descending=descending)
    want_values, want_indices = reference(X, dim, descending)
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    same_bits(values.numpy(), want_values)          # (-0 stays -0, where it came from)
    np.testing.assert_array_equal(dg.argsort(dg.ag_tensor(X), dim, descending).numpy(),
                                  want_indices)


@pytest.mark.parametrize("shape", [(2, 2048), (3, 2049), (1, 70000), (300, 1), (0, 5), (3, 0)])
def test_long_short_and_empty_rows(device, shape):
    x = RNG.integers(-50, 50, shape).astype(np.float32)
    for descending in (False, True):
        values, indices = X_sorted = dg.sort(dg.ag_tensor(x), descending=descending)
        keys = -x if descending else x
        want = np.argsort(keys, axis=-1, kind="stable")
        np.testing.assert_array_equal(indices.numpy(), want)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want, -1))
        assert X_sorted.values is values            # (a named tuple, as torch.return_types)


def test_int32_and_bool_tensors_sort_as_their_values(device):
    x = np.array([[5, -2 ** 31, 2 ** 31 - 1, -1, 0, 5, -1]], np.int32)
    values, indices = dg.ag_tensor(x, dtype="int32").sort(descending=True)
    want = np.argsort(-x.astype(np.int64), axis=-1, kind="stable")
    np.testing.assert_array_equal(indices.numpy(), want)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(x, want, -1))
    assert values.dtype == np.int32
    flags = dg.ag_tensor([True, False, True, False], dtype=bool)
    got = dg.sort(flags)
    assert got.values.dtype == np.bool_
    np.testing.assert_array_equal(got.values.numpy(), [False, False, True, True])
    np.testing.assert_array_equal(got.indices.numpy(), [1, 3, 0, 2])


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_takes_the_first_k_of_the_sort(device, dim, largest):
    for k in (0, 1, 3, X.shape[dim]):
        values, indices = dg.topk(dg.ag_tensor(X), k, dim=dim, largest=largest)
        want_values, want_indices = reference(X, dim, largest)
        keep = [slice(None)] * X.ndim
        keep[dim] = slice(0, k)
        np.testing.assert_array_equal(indices.numpy(), want_indices[tuple(keep)])
        same_bits(values.numpy(), want_values[tuple(keep)])
    v, i = dg.ag_tensor(X).topk(2, dim, largest)
    assert v.shape == i.shape == tuple(2 if d == dim % 3 else n for d, n in enumerate(X.shape))


def test_a_0d_tensor_sorts_to_itself(device):
    values, indices = dg.sort(dg.ag_tensor(np.float32(2.5)))
    assert values.shape == indices.shape == () and values.item() == 2.5 and indices.item() == 0
    for k in (0, 1):                                    # (PyTorch's: itself either way)
        assert dg.topk(dg.ag_tensor(np.float32(2.5)), k).values.item() == 2.5


DISTINCT = RNG.permutation(60).reshape(3, 4, 5) * 0.37 - 9.0     # no ties: smooth


@pytest.mark.parametrize("fn", [
    lambda t: dg.sort(t, 1).values,
    lambda t: dg.sort(t, 0, descending=True).values * 2.0,
    lambda t: dg.topk(t, 2, -1).values,
    lambda t: dg.topk(t, 3, 1, largest=False).values,
], ids=["sort", "sort-descending", "topk", "topk-smallest"])
def test_gradients_go_back_where_the_values_came_from(fn):
    dg.gradcheck(fn, [DISTINCT])


@pytest.mark.gpu
def test_gradients_on_the_gpu_match_the_cpu(gpu):
    grads = []
    weights = RNG.standard_normal((3, 2, 6)).astype(np.float32)
    for dev in ("cpu", "gpu"):
        dg.ag_device(dev)
        with dg.with_grad_tape():
            t = dg.ag_tensor(X[:3], requires_grad=True)
            dg.sum(dg.topk(t, 2, dim=1).values * dg.ag_tensor(weights)).backward()
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
    assert np.count_nonzero(grads[0]) > 0


@pytest.mark.gpu
def test_a_captured_step_with_topk_replays_as_eager_steps(gpu):
    assert_layer_step_replays(lambda h: dg.sum(dg.topk(h, 3).values ** 2), 8, seed=4)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_finds_numpys_insertion_points(device, right):
    # one row for all values, and a row for each line of values (ties, signed zeros,
    # infinities; a NaN value goes past every row, as PyTorch's)
    rng = np.random.default_rng(5)
    rows = rng.integers(-5, 6, (3, 40)).astype(np.float32)
    rows[0, :2] = -np.inf
    rows[1, 10:13] = -0.0
    rows = np.sort(rows, axis=-1)
    values = rng.integers(-7, 8, (3, 25)).astype(np.float32)
    values[1, :4] = [0.0, -0.0, np.inf, -np.inf]
    values[2, 0] = np.nan
    side = "right" if right else "left"
    got = dg.searchsorted(dg.tensor(rows), dg.tensor(values), right=right)
    want = [np.searchsorted(r, v, side) for r, v in zip(rows, values)]
    assert got.dtype == np.int32 and got.numpy().tolist() == np.stack(want).tolist()
    one = dg.searchsorted(dg.tensor(rows[1]), dg.tensor(values), side=side).numpy()
    assert one.tolist() == np.searchsorted(rows[1], values, side).tolist()
    assert one[2, 0] == 40                                          # (the NaN)
    ints = dg.searchsorted(dg.tensor(rows[2].astype(np.int32)), dg.tensor([[-9, 0, 3, 9]]),
                           right=right)
    assert ints.numpy().tolist() == [np.searchsorted(rows[2], [-9, 0, 3, 9], side).tolist()]
    assert dg.searchsorted(dg.tensor([1.0, 2.0, 3.0]), 2, right=right).item() == 1 + right


def test_searchsorted_through_a_sorter_and_bucketize(device):
    x = np.array([5.0, 1.0, 3.0, 9.0, 7.0], np.float32)
    order = np.argsort(x, kind="stable").astype(np.int32)
    got = dg.searchsorted(dg.tensor(x), dg.tensor([0.0, 3.0, 8.0, 10.0]), sorter=dg.tensor(order))
    assert got.numpy().tolist() == np.searchsorted(x, [0, 3, 8, 10], sorter=order).tolist()
    boundaries = dg.tensor([1.0, 5.0, 9.0])
    v = dg.tensor([[-1.0, 1.0, 5.0], [6.0, 9.0, 12.0]])
    # boundaries[i - 1] < x <= boundaries[i]; with right=True boundaries[i - 1] <= x < ...
    assert dg.bucketize(v, boundaries).numpy().tolist() == [[0, 0, 1], [2, 2, 3]]
    assert dg.bucketize(v, boundaries, right=True).numpy().tolist() == [[0, 1, 2], [2, 3, 3]]
    assert dg.bucketize(dg.tensor([True, False]), dg.tensor([0, 1])).numpy().tolist() == [1, 0]
    assert dg.searchsorted(dg.zeros(0), dg.tensor([1.0])).numpy().tolist() == [0]
    low = dg.searchsorted(dg.tensor([1.0, 2.0]).to(dg.bfloat16), dg.tensor([1.5]))
    assert low.numpy().tolist() == [1]


def test_searchsorted_refuses_float64_on_the_cpu():
    # (the kernels compare float32 and int32; the gpu has no float64 tensors at all)
    with pytest.raises(dg.ArgumentTypeError, match=r"^searchsorted: argument "
                                                   r"'sorted_sequence' has dtype float64"):
        dg.searchsorted(dg.tensor([1.0, 2.0], dtype=dg.float64), dg.tensor([1.0]))


@pytest.mark.gpu
def test_a_captured_step_with_bucketize_replays_as_eager_steps(gpu):
    assert_layer_step_replays(
        lambda h: dg.sum(h * dg.bucketize(h, dg.sort(h[0]).values).float()), 8, seed=6)


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: dg.searchsorted(t[0, 0], t[0], right=True, side="left"), dg.InvalidValueError,
     r"^searchsorted: argument 'side'"),
    (lambda t: dg.searchsorted(t[0, 0], t[0], side="up"), dg.InvalidValueError,
     r"^searchsorted: argument 'side'"),
    (lambda t: dg.searchsorted(t, t[0]), dg.ShapeError, r"^searchsorted: argument 'values'"),
    (lambda t: dg.searchsorted(t[0, 0, 0], t), dg.ShapeError,
     r"^searchsorted: argument 'sorted_sequence' has shape \(\)"),
    (lambda t: dg.searchsorted(t[0, 0], t, sorter=t[0, 0]), dg.ShapeError,
     r"^searchsorted: argument 'sorter'"),
    (lambda t: dg.searchsorted(t[0, 0], t, right=1), dg.ArgumentTypeError,
     r"^searchsorted: argument 'right'"),
    (lambda t: dg.bucketize(t, t), dg.ShapeError, r"^bucketize: argument 'boundaries'"),
    (lambda t: dg.bucketize("x", t[0, 0]), dg.ArgumentTypeError, r"^bucketize: argument 'input'"),
    (lambda t: dg.sort(t, 3), dg.InvalidValueError, r"^sort: argument 'dim'"),
    (lambda t: dg.sort(t, 1.0), dg.ArgumentTypeError, r"^sort: argument 'dim'"),
    (lambda t: dg.sort(t, descending=1), dg.ArgumentTypeError, r"^sort: argument 'descending'"),
    (lambda t: dg.argsort(t, stable="yes"), dg.ArgumentTypeError, r"^argsort: argument 'stable'"),
    (lambda t: dg.topk(t, 7), dg.InvalidValueError, r"^topk: argument 'k'"),
    (lambda t: dg.topk(t, -1), dg.InvalidValueError, r"^topk: argument 'k'"),
    (lambda t: dg.topk(t, 2, largest=None), dg.ArgumentTypeError, r"^topk: argument 'largest'"),
    (lambda t: dg.sort("abc"), dg.ArgumentTypeError, r"^sort: argument 'input'"),
])
def test_bad_arguments_name_themselves(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(dg.ag_tensor(X))
