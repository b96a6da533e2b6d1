"""Tensors of 5 and 6 dimensions: broadcasting, reductions, permutations, views and their
gradients against NumPy on both backends (the kernels index 4 dimensions: wider walks are
folded, then cut into pieces), and the shape rules that do it."""
import numpy as np
import pytest

import dualgrad as dg
from dualgrad.shapes import contiguous_strides, pieces, reduction_layout

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3, 1, 4, 2, 3)).astype(np.float32)
B = RNG.standard_normal((3, 5, 1, 2, 1)).astype(np.float32)
C = RNG.standard_normal((2, 1, 5, 4, 1, 3)).astype(np.float32)
X = RNG.standard_normal((2, 3, 4, 5, 2, 3)).astype(np.float32)


def close(got, want, tol=2e-6):
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol)


def test_a_walk_folds_and_what_does_not_fold_is_cut_into_pieces():
    # (2, 3, 4) read whole and with its middle axis broadcast: the last two axes fold
    shape, strides = (2, 3, 4), ((12, 4, 1), (4, 0, 1), (12, 4, 1))
    (piece,) = pieces(shape, strides)
    assert piece[0] == (1, 2, 3, 4)                  # three axes: no folding is possible
    walk = pieces((2, 3, 4, 5, 6, 7), (contiguous_strides((2, 3, 4, 5, 6, 7)),))
    assert len(walk) == 1 and walk[0][0] == (1, 1, 1, 5040)           # contiguous: one axis
    alternating = (2, 3, 2, 3, 2, 3)
    a = (0, 18, 0, 6, 0, 1)                                             # (1, 3, 1, 3, 1, 3)
    walk = pieces(alternating, (a, contiguous_strides(alternating)))
    assert len(walk) == 2 * 3                        # the two leading axes become pieces
    assert sorted(p[2] for p in walk) == sorted((j * 18, i * 108 + j * 36)
                                                for i in range(2) for j in range(3))
    assert reduction_layout((2, 3, 4, 5, 6, 7), (1, 3, 5)) == ((0, 2, 4, 1, 3, 5), (48, 105),
                                                               (1,))
    assert reduction_layout((2, 3, 4, 5, 6, 7), (2, 3)) == (None, (6, 20, 42), (1,))


def test_broadcasting_comparisons_and_integer_ops(device):
    ta, tb, tc = (dg.ag_tensor(v) for v in (A, B, C))
    close((ta + tb).numpy(), A + B)
    close((ta * tc).numpy(), A * C)
    close(dg.atan2(tb, tc).numpy(), np.arctan2(B, C), 1e-6)
    close(dg.where(ta > tc, ta, tb).numpy(), np.where(A > C, A, B))
    np.testing.assert_array_equal(((ta > 0) & (tc < 0)).numpy(), (A > 0) & (C < 0))
    ia, ic = (A * 10).astype(np.int32), (C * 10).astype(np.int32) | 1
    got = dg.ag_tensor(ia, dtype="int32") // dg.ag_tensor(ic, dtype="int32")
    np.testing.assert_array_equal(got.numpy(), np.floor_divide(ia, ic))


@pytest.mark.parametrize("axes", [(0,), (5,), (1, 3, 5), (0, 2, 4), None, (2, 3), (0, 5)])
def test_reductions_over_any_axes(device, axes):
    tx = dg.ag_tensor(X)
    close(dg.sum(tx, axes).numpy(), X.astype(np.float64).sum(axes), 1e-5)
    close(dg.mean(tx, axes, keepdims=True).numpy(), X.mean(axes, keepdims=True), 1e-5)
    close(dg.max(tx, axes).numpy(), X.max(axes))
    close(dg.prod(tx * 0.5 + 1, axes).numpy(), np.prod(X.astype(np.float64) * 0.5 + 1, axes),
          1e-4)


def test_permutations_views_and_row_ops(device):
    tx = dg.ag_tensor(X)
    perm = (5, 0, 3, 1, 4, 2)
    close(dg.transpose(tx, perm).numpy(), X.transpose(perm))
    close(tx[:, ::-1, 1:3, ..., ::2].numpy(), X[:, ::-1, 1:3, ..., ::2])
    close(tx[1, None, :, 2].numpy(), X[1, None, :, 2])
    close(dg.flip(tx, (1, 4)).numpy(), np.flip(X, (1, 4)))
    close(dg.concat([tx, tx * 2], 3).numpy(), np.concatenate([X, X * 2], 3))
    close(dg.broadcast_to(dg.ag_tensor(B), (2, 3, 5, 4, 2, 3)).numpy(),
          np.broadcast_to(B, (2, 3, 5, 4, 2, 3)))
    close(dg.softmax(tx).numpy(), np.exp(X) / np.exp(X).sum(-1, keepdims=True), 1e-5)
    close(dg.cumsum(tx, 2).numpy(), np.cumsum(X, 2), 1e-5)
    np.testing.assert_array_equal(dg.argmax(tx, 3).numpy(), X.argmax(3))
    close(dg.sort(tx, 1).values.numpy(), np.sort(X, 1))


def _loss(ta, tb):
    p = ta * tb
    return dg.sum(dg.transpose(p, (5, 0, 3, 1, 4, 2)) ** 2) + dg.sum(dg.max(p, (1, 3, 5)))


def test_gradients_through_broadcasting_reductions_and_permutations(device):
    with dg.with_grad_tape():
        ta, tb = dg.ag_tensor(A, requires_grad=True), dg.ag_tensor(B, requires_grad=True)
        _loss(ta, tb).backward()
    p = A.astype(np.float64) * B
    top = p == p.max((1, 3, 5), keepdims=True)
    d = 2 * p + top / top.sum((1, 3, 5), keepdims=True)
    close(ta.grad.numpy(), (d * B).sum(2, keepdims=True), 1e-4)
    close(tb.grad.numpy(), (d * A).sum(0).sum((2, 4), keepdims=True), 1e-4)


def test_gradients_by_finite_differences():
    a = RNG.standard_normal((2, 1, 2, 1, 2, 3))
    b = RNG.standard_normal((2, 1, 2, 1, 3)) + 3.0
    dg.gradcheck(lambda x, y: dg.sum(x * y, (0, 2, 4)) / y, [a, b])


def test_seven_dimensions_are_refused(device):
    with pytest.raises(dg.ShapeError, match=r"at most 6 dimensions"):
        dg.ag_tensor(np.zeros((1,) * 7, np.float32))
    with pytest.raises(dg.InvalidValueError, match=r"^reshape: argument 'shape'"):
        dg.reshape(dg.ag_tensor(X), (2, 3, 4, 5, 2, 3, 1))
