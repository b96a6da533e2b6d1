"""PyTorch's names made of other ops: clone, narrow, select, tile, meshgrid, index_add,
baddbmm, logit and xlogy, against NumPy on both backends, their gradients by finite
differences, and their errors."""
import numpy as np
import pytest

import dualgrad as dg

A = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)


def t(a, **kw):
    return dg.ag_tensor(a, **kw)


def test_clone_narrow_and_select_copy_as_pytorchs(device):
    x = t(A)
    np.testing.assert_array_equal(dg.clone(x).numpy(), A)
    np.testing.assert_array_equal(dg.narrow(x, 2, 1, 2).numpy(), A[:, :, 1:3])
    np.testing.assert_array_equal(dg.select(x, 1, -1).numpy(), A[:, -1])
    np.testing.assert_array_equal(x.select(2, 0).numpy(), A[:, :, 0])
    m = t([[True, False], [False, True]], dtype=bool)
    assert dg.select(m, 0, 1).numpy().tolist() == [False, True]


@pytest.mark.parametrize("dims", [(2,), (1, 2), (2, 1, 1), (3, 1, 2, 1), (0, 1)])
def test_tile_repeats_as_numpys_tile(device, dims):
    np.testing.assert_array_equal(dg.tile(t(A[0]), dims).numpy(), np.tile(A[0], dims))
    np.testing.assert_array_equal(t(A[0]).tile(*dims).numpy(), np.tile(A[0], dims))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_as_numpys(device, indexing):
    axes = [np.arange(3.0, dtype=np.float32), np.arange(2.0, dtype=np.float32) + 5,
            np.array([7.0, 8.0, 9.0, 10.0], np.float32)]
    for count in (1, 2, 3):
        got = dg.meshgrid(*[t(a) for a in axes[:count]], indexing=indexing)
        want = np.meshgrid(*axes[:count], indexing=indexing)
        assert len(got) == count
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    ints = dg.meshgrid([dg.arange(2, dtype="int32"), dg.arange(3, dtype="int32")])
    assert ints[0].dtype == np.int32 and ints[1].numpy().tolist() == [[0, 1, 2], [0, 1, 2]]


def test_index_add_accumulates_repeated_positions(device):
    index = np.array([2, 0, 2])
    source = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    got = dg.index_add(t(np.ones((4, 2), np.float32)), 0, index, t(source), alpha=2.0)
    want = np.ones((4, 2), np.float32)
    np.add.at(want, index, 2 * source)
    np.testing.assert_array_equal(got.numpy(), want)
    along = t(A).index_add(2, dg.tensor([3, 1]), t(A[:, :, :2]))
    want = A.copy()
    want[:, :, 3] += A[:, :, 0]
    want[:, :, 1] += A[:, :, 1]
    np.testing.assert_array_equal(along.numpy(), want)


def test_baddbmm_scales_and_adds_as_pytorchs(device, rng):
    c, a, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 1), (2, 3, 4),
                                                                   (2, 4, 5)))
    got = dg.baddbmm(t(c), t(a), t(b), beta=0.5, alpha=-2.0).numpy()
    np.testing.assert_allclose(got, 0.5 * c - 2.0 * (a @ b), rtol=1e-5, atol=1e-5)
    nan = np.full((2, 3, 5), np.nan, np.float32)
    np.testing.assert_allclose(dg.baddbmm(t(nan), t(a), t(b), beta=0).numpy(), a @ b,
                               rtol=1e-5, atol=1e-5)            # (beta 0 ignores input)


def test_logit_and_xlogy_as_pytorchs(device):
    p = np.array([0.25, 0.5, 0.9, 0.0, 1.0], np.float32)
    with np.errstate(divide="ignore"):
        want = np.log(p.astype(np.float64) / (1 - p.astype(np.float64)))
    np.testing.assert_allclose(dg.logit(t(p)).numpy(), want, rtol=1e-6)
    clamped = np.clip(p, 0.1, 0.9).astype(np.float64)
    np.testing.assert_allclose(dg.logit(t(p), eps=0.1).numpy(),
                               np.log(clamped / (1 - clamped)), rtol=1e-6)
    x = np.array([0.0, 0.0, 0.0, 2.0, -1.5], np.float32)
    y = np.array([0.0, np.inf, np.nan, 3.0, 0.5], np.float32)
    got = dg.xlogy(t(x), t(y)).numpy()
    np.testing.assert_allclose(got, [0.0, 0.0, np.nan, 2 * np.log(3.0), -1.5 * np.log(0.5)],
                               rtol=1e-6)
    assert dg.xlogy(t(x[3:]), 2.0).numpy().tolist() == pytest.approx([2 * np.log(2.0),
                                                                      -1.5 * np.log(2.0)])


def test_gradients_by_finite_differences(rng):
    x = rng.standard_normal((2, 3, 4))
    assert dg.gradcheck(lambda v: dg.select(v, 1, 2) * 3.0, x)
    assert dg.gradcheck(lambda v: dg.tile(v, (2, 1, 2)), x)
    assert dg.gradcheck(lambda v: dg.meshgrid(v[0, 0], v[1, :, 1])[0] *
                        dg.meshgrid(v[0, 0], v[1, :, 1])[1], x)
    assert dg.gradcheck(lambda v, s: dg.index_add(v, 1, [2, 0, 2], s, alpha=0.5),
                        (x, rng.standard_normal((2, 3, 4))))
    assert dg.gradcheck(lambda c, a, b: dg.baddbmm(c, a, b, beta=0.5, alpha=2.0),
                        (rng.standard_normal((3, 5)), rng.standard_normal((2, 3, 4)),
                         rng.standard_normal((2, 4, 5))))
    assert dg.gradcheck(dg.logit, rng.uniform(0.1, 0.9, 5))
    assert dg.gradcheck(dg.xlogy, (rng.standard_normal(5), rng.uniform(0.5, 2.0, 5)))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda x: dg.select(x, 1, 3), dg.IndexOutOfRange, r"^select: index 3 is out of range"),
    (lambda x: dg.select(x, 3, 0), dg.AxisOutOfRange, r"^select: argument 'dim'"),
    (lambda x: dg.tile(x, 2), dg.ArgumentTypeError, r"^tile: argument 'dims'"),
    (lambda x: dg.tile(x, (-1,)), dg.InvalidValueError, r"^tile: argument 'dims\[0\]'"),
    (lambda x: dg.meshgrid(x), dg.ShapeError, r"^meshgrid: argument 'tensors\[0\]'"),
    (lambda x: dg.meshgrid(x[0, 0], x[0, 0], indexing="yx"), dg.InvalidValueError,
     r"^meshgrid: argument 'indexing'"),
    (lambda x: dg.meshgrid(), dg.InvalidValueError, r"^meshgrid: argument 'tensors'"),
    (lambda x: dg.index_add(x, 1, [0, 3], x[:, :2]), dg.IndexOutOfRange,
     r"^index_add: index 3 is out of range for dim 1"),
    (lambda x: dg.index_add(x, 1, [0, 1], x), dg.ShapeError, r"^index_add: argument 'source'"),
    (lambda x: dg.index_add(x, 1, [[0]], x[:, :1]), dg.ShapeError,
     r"^index_add: argument 'index'"),
    (lambda x: dg.baddbmm(x, x, x[:, :2]), dg.ShapeError, r"^matmul: inner dimensions"),
    (lambda x: dg.logit(x, eps=0.7), dg.InvalidValueError, r"^logit: argument 'eps'"),
])
def test_bad_arguments_are_named(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(t(A))


def test_triangle_indices_as_numpys(device):
    for fn, np_fn in ((dg.triu_indices, np.triu_indices), (dg.tril_indices, np.tril_indices)):
        for row, col, offset in ((4, 4, 0), (3, 5, 1), (5, 2, -1), (0, 3, 0)):
            got = fn(row, col, offset)
            assert got.dtype == np.int32 and got.shape[0] == 2
            np.testing.assert_array_equal(got.numpy(), np.stack(np_fn(row, offset, col)))


@pytest.mark.parametrize("k", [-1, 0, 1, 2, 3, 5])
@pytest.mark.parametrize("dims", [(0, 1), (2, 0), (1, -1)])
def test_rot90_as_numpys(device, k, dims):
    np.testing.assert_array_equal(dg.rot90(t(A), k, dims).numpy(), np.rot90(A, k, dims))


def test_cartesian_prod_block_diag_and_windows(device):
    a, b = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0, 5.0], np.float32)
    got = dg.cartesian_prod(t(a), t(b)).numpy()
    np.testing.assert_array_equal(got, [[x, y] for x in a for y in b])
    np.testing.assert_array_equal(dg.cartesian_prod(t(a)).numpy(), a)
    blocks = dg.block_diag(t(np.ones((2, 2), np.float32)), t(b), t(np.float32(7.0))).numpy()
    want = np.zeros((4, 6), np.float32)
    want[:2, :2], want[2, 2:5], want[3, 5] = 1.0, b, 7.0
    np.testing.assert_array_equal(blocks, want)
    ints = dg.block_diag(dg.tensor([[1, 2]]), dg.tensor([3]))
    assert ints.dtype == np.int32 and ints.numpy().tolist() == [[1, 2, 0], [0, 0, 3]]
    seq = np.arange(7.0, dtype=np.float32)
    windows = t(seq).unfold(0, 3, 2).numpy()
    np.testing.assert_array_equal(windows, [[0, 1, 2], [2, 3, 4], [4, 5, 6]])
    np.testing.assert_array_equal(t(A).unfold(1, 2, 1).numpy(),
                                  np.stack([A[:, 0:2], A[:, 1:3]], 1).transpose(0, 1, 3, 2))


def test_kron_and_cross_as_numpys(device, rng):
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 2, 2))
    b = b.astype(np.float32)
    np.testing.assert_allclose(dg.kron(t(a), t(b)).numpy(), np.kron(a, b), rtol=1e-6)
    np.testing.assert_allclose(dg.kron(t(a[0]), t(a[1])).numpy(), np.kron(a[0], a[1]),
                               rtol=1e-6)
    u, v = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((1, 3))
    v = v.astype(np.float32)
    np.testing.assert_allclose(dg.cross(t(u), t(v)).numpy(), np.cross(u, v), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(dg.cross(t(u.T), t(v.T), dim=0).numpy(),
                               np.cross(u, v).T, rtol=1e-5, atol=1e-6)


def test_more_gradients_by_finite_differences(rng):
    x = rng.standard_normal((3, 4))
    assert dg.gradcheck(lambda v: dg.rot90(v, 1) * dg.rot90(v, 3), x)
    assert dg.gradcheck(lambda v: v.unfold(1, 2, 1) * 2.0, x)
    assert dg.gradcheck(dg.kron, (x, rng.standard_normal((2, 2))))
    assert dg.gradcheck(dg.cross, (rng.standard_normal((2, 3)), rng.standard_normal((2, 3))))
    assert dg.gradcheck(lambda p, q: dg.block_diag(p, q), (x, rng.standard_normal(2)))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda x: dg.rot90(x, 1, (1, 1)), dg.InvalidValueError, r"^rot90: argument 'dims'"),
    (lambda x: dg.rot90(x, 1, (0,)), dg.ArgumentTypeError, r"^rot90: argument 'dims'"),
    (lambda x: dg.triu_indices(-1, 2), dg.InvalidValueError, r"^triu_indices: argument 'row'"),
    (lambda x: dg.block_diag(x), dg.ShapeError, r"^block_diag: argument 'tensors\[0\]'"),
    (lambda x: x.unfold(1, 4, 1), dg.InvalidValueError, r"^Tensor.unfold: argument 'size'"),
    (lambda x: x.unfold(1, 2, 0), dg.InvalidValueError, r"^Tensor.unfold: argument 'step'"),
    (lambda x: dg.cross(x[:, :2], x[:, :2]), dg.ShapeError,
     r"^cross: argument 'input' has shape \(2, 2, 4\); expected an axis of size 3"),
    (lambda x: dg.cross(x[:, :, :3], x[:, :, :3], dim=0), dg.ShapeError,
     r"^cross: argument 'input' has shape \(2, 3, 3\); expected size 3 along dim 0"),
    (lambda x: dg.kron(x.reshape(2, 3, 2, 2), x[0, 0]), dg.ShapeError,
     r"^kron: argument 'input'"),
])
def test_more_bad_arguments_are_named(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(t(A))
