"""sort, argsort and topk against a plain stable sort on both backends (NaN, signed zeros,
ties, int32 and bool tensors, rows longer than the device's shared-memory block), their
gradients, a captured step, and bad arguments."""
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


@pytest.mark.parametrize("call, error, pattern", [
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
