"""t[...] and the view ops against NumPy on both backends: values, gradients (each element's
gradient goes back where it came from, repeats adding up), finite differences, and errors."""
import numpy as np
import pytest

import dualgrad as dg

X = np.arange(120, dtype=np.float64).reshape(2, 3, 4, 5) * 0.5 - 7.0

KEYS = {
    "int": 1, "negative-int": -1, "ints": (1, 2), "slice": slice(1, None),
    "step": (slice(None), slice(None, None, 2)), "negative-step": (Ellipsis, slice(None, None, -2)),
    "reversed-range": (slice(None), slice(2, 0, -1), 0), "empty-slice": slice(2, 1),
    "none": (None, 0, 1), "ellipsis-int": (Ellipsis, 3), "all": Ellipsis,
    "mixed": (1, slice(None), None, slice(4, 0, -3), -2),
    "array": np.array([1, 0, 1]), "array-axis2": (slice(None), 1, np.array([[3, 3], [0, 1]])),
    "array-after-ellipsis": (Ellipsis, np.array([4, -5])), "list": [1, 0],
    "array-and-none": (None, slice(None), 0, np.array([0, 2])),
    "mask": X[:, :, 0, 0] > -4.0, "full-mask": X > 10.0,
    # bools are 0-d masks: together one new axis, of 1 if all are True else 0
    "true": True, "false": False, "bool-beside-int": (0, True), "zero-d-mask": np.array(True),
    "bools-apart": (True, Ellipsis, False), "bools-together": (1, True, False, 2),
    "empty-list": [],
}


def np_grad(key, g):
    """Where each element of x[key] came from, with g added there."""
    pos = np.arange(X.size).reshape(X.shape)[key]
    out = np.zeros(X.size)
    np.add.at(out, pos.reshape(-1), g.reshape(-1))
    return out.reshape(X.shape)


@pytest.mark.parametrize("name", list(KEYS))
def test_getitem_matches_numpy(device, name):
    key = KEYS[name]
    expected = X[key]
    g = np.random.default_rng(0).standard_normal(expected.shape).astype(np.float32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(X, requires_grad=True)
        out = t[key]
        out.backward(g)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected.astype(np.float32))
    np.testing.assert_allclose(t.grad.numpy(), np_grad(key, g.astype(np.float64)), rtol=1e-6)


def test_an_int_beside_an_index_array_selects_first_as_in_pytorch(device):
    # NumPy counts the 0 as a second index array and moves the broadcast axis to the front,
    # giving (2, 3, 5); PyTorch (and dualgrad) select with the int first
    out = dg.ag_tensor(X)[0, :, np.array([0, 2])]
    assert out.shape == (3, 2, 5)
    np.testing.assert_array_equal(out.numpy(), X[0][:, [0, 2]].astype(np.float32))


def test_several_index_arrays_broadcast_together_as_in_pytorch(device):
    """Arrays next to each other (or with only ints between them) put their broadcast shape
    in their place; separated by a slice or None, in front."""
    x = np.arange(3 * 4 * 5 * 2, dtype=np.float32).reshape(3, 4, 5, 2)
    t = dg.ag_tensor(x)
    rows, cols = np.array([[0], [2]]), np.array([1, 3, 0])
    cases = [((rows, cols), x[rows, cols]),
             ((slice(None), np.array([0, 3]), np.array([4, 1])), x[:, [0, 3], [4, 1]]),
             ((np.array([0, 2]), slice(None), np.array([4, 1])), x[[0, 2], :, [4, 1]]),
             ((Ellipsis, np.array([-1, 0]), np.array([0, 1])), x[..., [-1, 0], [0, 1]]),
             ((np.array([1, 0]), 2, rows), x[[1, 0], 2][np.arange(2), rows]),
             ((np.array([-1, 0]), None, slice(1, 3), np.array([2, -5])),
              x[[-1, 0], None, 1:3, [2, -5]])]
    for key, want in cases:
        got = t[key]
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(got.numpy(), want)
    with dg.with_grad_tape():
        p = dg.ag_tensor(x, requires_grad=True)
        dg.sum(p[np.array([0, 0, 2]), :, np.array([1, 1, 4])] * 2.0).backward()
    grad = np.zeros_like(x)
    np.add.at(grad, (np.array([0, 0, 2]), slice(None), np.array([1, 1, 4])), 2.0)
    np.testing.assert_array_equal(p.grad.numpy(), grad)           # repeats add up
    mask = x[:, :, 0, 0] % 3 == 0                                     # (3, 4)
    for key in ((slice(None), mask[0]), (mask, 1), (Ellipsis, np.array([True, False])),
                (slice(1, 3), mask[0], np.array([4, 0]))):   # a mask beside other indices
        np.testing.assert_array_equal(t[key].numpy(), x[key])
    ints = dg.ag_tensor(x.astype(np.int32), dtype="int32")
    np.testing.assert_array_equal(ints[np.array([0, 2]), np.array([1, 3])].numpy(),
                                  x.astype(np.int32)[[0, 2], [1, 3]])


def test_getitem_gradient_by_finite_differences():
    x = np.random.default_rng(1).standard_normal((3, 4))
    dg.gradcheck(lambda t: dg.mul(t[1:, ::-2], t[:2, np.array([0, 0])]), [x])


def test_iterating_a_tensor_gives_its_rows(device):
    rows = list(dg.ag_tensor(X[0, 0]))
    assert len(rows) == 4
    np.testing.assert_array_equal(rows[2].numpy(), X[0, 0, 2].astype(np.float32))
    with pytest.raises(dg.ArgumentTypeError, match="iteration over a 0-d tensor"):
        iter(dg.ag_tensor(1.0))


def test_empty_axes_split_and_reduce_to_empty_results_as_in_pytorch(device):
    empty = dg.ag_tensor(np.zeros((0, 3), np.float32))
    assert [p.shape for p in dg.chunk(empty, 3)] == [(0, 3)] * 3
    assert [p.shape for p in dg.split(empty, 0)] == [(0, 3)]
    assert dg.argmax(empty, 1).shape == (0,)
    assert dg.argmin(empty, 1, keepdim=True).shape == (0, 1)
    with pytest.raises(dg.ShapeError, match="dim 0 of the input has no elements"):
        dg.argmax(empty, 0)


def test_index_select_of_a_0d_index_keeps_the_axis(device):
    out = dg.index_select(dg.ag_tensor(X[0, 0]), 0, np.array(2))
    assert out.shape == (1, 5)
    np.testing.assert_array_equal(out.numpy(), X[0, 0, 2:3].astype(np.float32))


VIEWS = {
    "squeeze": (lambda t: dg.squeeze(t), lambda x: np.squeeze(x), (1, 3, 1, 2)),
    "squeeze-dim": (lambda t: t.squeeze((0, 1)), lambda x: np.squeeze(x, 0), (1, 3, 1, 2)),
    "unsqueeze": (lambda t: dg.unsqueeze(t, -1), lambda x: x[..., None], (3, 2)),
    "unsqueeze-front": (lambda t: t.unsqueeze(0), lambda x: x[None], (3, 2)),
    "flatten": (lambda t: dg.flatten(t), lambda x: x.reshape(-1), (2, 3, 4)),
    "flatten-middle": (lambda t: t.flatten(1, 2), lambda x: x.reshape(2, 12, 5), (2, 3, 4, 5)),
    "broadcast_to": (lambda t: dg.broadcast_to(t, (2, 4, 3)),
                     lambda x: np.broadcast_to(x, (2, 4, 3)), (4, 1)),
    "expand": (lambda t: t.expand(3, -1, 5), lambda x: np.broadcast_to(x, (3, 2, 5)), (2, 1)),
    "flip": (lambda t: dg.flip(t, (0, 2)), lambda x: x[::-1, :, ::-1], (2, 3, 4)),
    "flip-one": (lambda t: t.flip(-1), lambda x: x[..., ::-1], (3, 5)),
    "index_select": (lambda t: dg.index_select(t, 1, np.array([[2, 0], [2, 2]])),
                     lambda x: np.take(x, [[2, 0], [2, 2]], axis=1), (2, 3)),
    "view": (lambda t: t.view(6, -1), lambda x: x.reshape(6, -1), (3, 4)),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_ops_match_numpy(device, name):
    ours, ref, shape = VIEWS[name]
    x = np.random.default_rng(2).standard_normal(shape)
    out = ours(dg.ag_tensor(x))
    np.testing.assert_array_equal(out.numpy(), ref(x).astype(np.float32))


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_ops_gradients_by_finite_differences(name):
    ours, _, shape = VIEWS[name]
    dg.gradcheck(ours, [np.random.default_rng(3).standard_normal(shape)])


A, B, C = (np.random.default_rng(k).standard_normal(shape)
           for k, shape in enumerate([(2, 3, 4), (2, 5, 4), (2, 1, 4)]))
JOINS = {
    "concat": (lambda *ts: dg.concat(ts, 1), lambda *xs: np.concatenate(xs, 1), (A, B, C)),
    "cat-last": (lambda a, b: dg.cat([a, b], -1), lambda a, b: np.concatenate([a, b], -1),
                 (A, A)),
    "stack": (lambda a, b: dg.stack([a, b]), lambda a, b: np.stack([a, b]), (A, 2 * A)),
    "stack-last": (lambda a, b: dg.stack((a, b), -1), lambda a, b: np.stack([a, b], -1),
                   (A, A)),
    "split": (lambda b: dg.split(b, 2, 1)[2], lambda b: b[:, 4:], (B,)),
    "split-sections": (lambda b: dg.split(b, [1, 4], dim=1)[1], lambda b: b[:, 1:], (B,)),
    "chunk": (lambda b: dg.chunk(b, 2, 1)[0], lambda b: b[:, :3], (B,)),
    "roll": (lambda b: dg.roll(b, 2, 1), lambda b: np.roll(b, 2, 1), (B,)),
    "roll-two-dims": (lambda b: dg.roll(b, (-1, 7), (0, -1)),
                      lambda b: np.roll(b, (-1, 7), (0, -1)), (B,)),
    "roll-flat": (lambda b: dg.roll(b, 5), lambda b: np.roll(b, 5), (B,)),
    "repeat": (lambda a: a.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), (A,)),
    "repeat-new-axis": (lambda a: dg.repeat(a[0], 2, 1, 2), lambda a: np.tile(a[0], (2, 1, 2)),
                        (A,)),
    "repeat-zero": (lambda a: a.repeat(1, 0, 1), lambda a: a[:, :0], (A,)),
    # torch.nn.functional.pad's modes are NumPy's constant, reflect, edge and wrap
    "pad-constant": (lambda b: dg.pad(b, (1, 2, 0, 3), value=1.5),
                     lambda b: np.pad(b, ((0, 0), (0, 3), (1, 2)), constant_values=1.5), (B,)),
    "pad-crop": (lambda b: dg.pad(b, (-1, 2, 1, -2)),
                 lambda b: np.pad(b[:, :-2, 1:], ((0, 0), (1, 0), (0, 2))), (B,)),
    "pad-reflect": (lambda b: dg.pad(b, (3, 1, 2, 4), mode="reflect"),
                    lambda b: np.pad(b, ((0, 0), (2, 4), (3, 1)), mode="reflect"), (B,)),
    "pad-replicate": (lambda b: dg.pad(b, (2, 0, 1, 1, 1, 2), mode="replicate"),
                      lambda b: np.pad(b, ((1, 2), (1, 1), (2, 0)), mode="edge"), (B,)),
    "pad-circular": (lambda b: dg.pad(b, (4, 2, 0, 5), mode="circular"),
                     lambda b: np.pad(b, ((0, 0), (0, 5), (4, 2)), mode="wrap"), (B,)),
}


@pytest.mark.parametrize("name", list(JOINS))
def test_joining_and_splitting_match_numpy(device, name):
    ours, ref, arrays = JOINS[name]
    out = ours(*(dg.ag_tensor(a) for a in arrays))
    np.testing.assert_array_equal(out.numpy(), ref(*arrays).astype(np.float32))


@pytest.mark.parametrize("name", list(JOINS))
def test_joining_gradients_by_finite_differences(name):
    ours, _, arrays = JOINS[name]
    dg.gradcheck(ours, list(arrays))


def test_split_and_chunk_give_pytorchs_parts(device):
    b = dg.ag_tensor(B)
    assert [p.shape[1] for p in dg.split(b, 2, 1)] == [2, 2, 1]
    assert [p.shape[1] for p in dg.chunk(b, 3, 1)] == [2, 2, 1]
    assert [p.shape[1] for p in dg.chunk(b, 4, 1)] == [2, 2, 1]     # fewer where they run out


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: t[2], dg.IndexOutOfRange, r"^getitem: index 2 is out of range for axis 0 of size 2"),
    (lambda t: t[0, 0, 0, 0, 0], dg.IndexOutOfRange, r"^getitem: too many indices \(5\)"),
    (lambda t: t[..., ...], dg.InvalidValueError, r"^getitem: argument 'key'.*at most one"),
    (lambda t: t[np.array([0, 1]), np.array([1, 0, 1])], dg.IndexShapeError,
     r"^getitem: argument 'key'.*broadcast together"),
    (lambda t: t[np.array([0]), np.array([True])], dg.IndexShapeError,
     r"^getitem: argument 'mask'"),
    (lambda t: t[True, np.array([0])], dg.InvalidValueError,
     r"^getitem: argument 'key'.*not beside index arrays"),
    (lambda t: t[np.array([2])], dg.IndexOutOfRange, r"^getitem: index 2 is out of range"),
    (lambda t: t[np.zeros(3, bool)], dg.IndexShapeError, r"^getitem: argument 'mask'"),
    (lambda t: t["a"], dg.ArgumentTypeError, r"^getitem: argument 'key'"),
    (lambda t: t[dg.ag_tensor([0.0])], dg.ArgumentTypeError, r"^getitem: argument 'key'"),
    (lambda t: dg.unsqueeze(t, 6), dg.AxisOutOfRange, r"^unsqueeze: argument 'dim'"),
    (lambda t: dg.flatten(t, 2, 1), dg.InvalidValueError, r"^flatten: argument 'end_dim'"),
    (lambda t: dg.broadcast_to(t, (3, 3, 4, 5)), dg.ShapeError, r"^broadcast_to: argument 'x'"),
    (lambda t: dg.flip(t, (1, 1)), dg.InvalidValueError, r"^flip: argument 'dims'"),
    (lambda t: dg.index_select(t, 0, np.array([0.5])), dg.ArgumentTypeError,
     r"^index_select: argument 'index'"),
    (lambda t: dg.index_select(t, 9, np.array([0])), dg.AxisOutOfRange,
     r"^index_select: argument 'dim'"),
    (lambda t: t[:, None, None, None], dg.ShapeError, r"^getitem: argument 'result'"),
    (lambda t: dg.concat([t, t[:, :1, :2]], 1), dg.ShapeError,
     r"^concat: argument 'tensors\[1\]' has shape \(2, 1, 2, 5\); expected tensors\[0\]'s"),
    (lambda t: dg.concat([]), dg.InvalidValueError, r"^concat: argument 'tensors'"),
    (lambda t: dg.stack([t, t[0]]), dg.ShapeError, r"^stack: argument 'tensors\[1\]'"),
    (lambda t: dg.split(t, [1, 2]), dg.InvalidValueError,
     r"^split: argument 'split_size_or_sections'.*summing to 2"),
    (lambda t: dg.chunk(t, 0), dg.InvalidValueError, r"^chunk: argument 'chunks'"),
    (lambda t: t.repeat(2, 2), dg.InvalidValueError, r"^repeat: argument 'sizes'.*at least 4"),
    (lambda t: t.repeat(1, 1, 1, 1, 1, 1, 2), dg.ShapeError, r"^repeat: argument 'result'"),
    (lambda t: dg.pad(t, (1,)), dg.InvalidValueError, r"^pad: argument 'pad'"),
    (lambda t: dg.pad(t, (5, 0), mode="reflect"), dg.InvalidValueError,
     r"^pad: argument 'pad'.*shorter than axis 3"),
    (lambda t: dg.pad(t, (-6, 0)), dg.InvalidValueError, r"^pad: argument 'pad'.*crops"),
    (lambda t: dg.pad(t, (6, 0), mode="circular"), dg.InvalidValueError,
     r"^pad: argument 'pad'"),
    (lambda t: dg.pad(t, (1, 1), mode="wrap"), dg.InvalidValueError, r"^pad: argument 'mode'"),
    (lambda t: dg.pad(t, (1, 1), value="x"), dg.ArgumentTypeError, r"^pad: argument 'value'"),
    (lambda t: dg.roll(t, (1, 2), 0), dg.InvalidValueError, r"^roll: argument 'shifts'"),
])
def test_bad_keys_are_named(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(dg.ag_tensor(X))


@pytest.mark.parametrize("call", [
    lambda t: t[2], lambda t: t[np.ones(3, bool)], lambda t: t[[0, 1], [0, 1, 0]],
    lambda t: dg.sum(t, 4), lambda t: dg.softmax(t, -5), lambda t: dg.flip(t, 7),
    lambda t: dg.cumsum(t, 4), lambda t: dg.argmax(t, 4), lambda t: dg.sort(t, 4),
    lambda t: dg.gather(t, 0, np.full((1, 1, 1, 1), 5)), lambda t: dg.one_hot(np.array([3]), 2),
    lambda t: dg.embedding(t[0, 0], np.array([4])),
], ids=["int", "mask shape", "arrays", "sum dim", "softmax dim", "flip dim", "cumsum dim",
        "argmax dim", "sort dim", "gather index", "one_hot class", "embedding row"])
def test_index_and_dim_errors_are_index_errors_as_in_pytorch(device, call):
    """PyTorch raises IndexError for an index or a dim out of range and for an index of the
    wrong shape; ours are IndexErrors too (and still the ValueErrors they were)."""
    with pytest.raises(IndexError) as caught:
        call(dg.ag_tensor(X))
    assert isinstance(caught.value, (dg.InvalidValueError, dg.ShapeError))


def _np_scatter_add(x, dim, idx, src):
    out = x.astype(np.float64).copy()
    coords = list(np.indices(idx.shape))
    coords[dim] = idx
    np.add.at(out, tuple(coords), src)
    return out


@pytest.mark.parametrize("shape,dim,k", [((3, 5), 1, 4), ((3, 5), 0, 6), ((2, 3, 4), 1, 5),
                                         ((4,), 0, 7), ((2, 3), -1, 0)])
def test_scatter_add_matches_numpy_and_routes_gradients(device, shape, dim, k):
    rng = np.random.default_rng(k)
    x = rng.standard_normal(shape).astype(np.float32)
    ishape = list(shape)
    ishape[dim] = k
    idx = rng.integers(0, shape[dim], ishape)
    src = rng.standard_normal(ishape).astype(np.float32)
    tx, ts = dg.ag_tensor(x, requires_grad=True), dg.ag_tensor(src, requires_grad=True)
    g = rng.standard_normal(shape).astype(np.float32)
    with dg.with_grad_tape():
        y = dg.scatter_add(tx, dim, idx, ts)
        dg.sum(y * dg.ag_tensor(g)).backward()
    np.testing.assert_allclose(y.numpy(), _np_scatter_add(x, dim, idx, src), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_array_equal(tx.grad.numpy(), g)
    np.testing.assert_array_equal(ts.grad.numpy(), np.take_along_axis(g, idx, dim))


def test_scatter_add_reads_an_index_smaller_than_input_and_src_as_pytorch(device):
    x = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    idx = np.array([[4, 0, 4], [1, 1, 2]])                 # rows 0-1, columns 0-2 of src
    src = np.arange(1.0, 13.0, dtype=np.float32).reshape(3, 4)
    want = x.copy()
    for i in range(2):
        for j in range(3):
            want[i, idx[i, j]] += src[i, j]
    np.testing.assert_array_equal(dg.scatter_add(dg.ag_tensor(x), 1, idx, src).numpy(), want)
    with pytest.raises(dg.ShapeError, match=r"^scatter_add: argument 'index'"):
        dg.scatter_add(dg.ag_tensor(x), 1, np.zeros((5, 1), np.int64), src)


def test_scatter_add_by_finite_differences_and_its_errors():
    idx = np.array([[0, 2, 0], [1, 1, 2]])
    dg.gradcheck(lambda x, s: dg.scatter_add(x, 1, idx, s) * x,
                 [np.arange(6.0).reshape(2, 3), np.ones((2, 3)) * 0.5])
    x = dg.ag_tensor(np.zeros((2, 3)))
    with pytest.raises(dg.ShapeError, match=r"^scatter_add: argument 'src'"):
        dg.scatter_add(x, 1, idx, np.ones((2, 2)))
    with pytest.raises(dg.InvalidValueError, match=r"^scatter_add: argument 'index' holds"):
        dg.scatter_add(x, 1, idx + 1, np.ones((2, 3)))
    assert dg.scatter_add(x, 1, dg.ag_tensor(idx, dtype="int32"),
                          np.ones((2, 3))).numpy().tolist() == [[2, 0, 1], [0, 2, 1]]
