"""Products under PyTorch's rules and names: matmul of vectors and broadcast stacks, mm,
bmm, mv, dot, outer, addmm, tensordot and einsum (dualgrad/api/linalg.py), on both
backends, against float64 NumPy within the matmul tolerance, gradients included."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dualgrad as dg
from dualgrad.testing import tolerances

RNG = np.random.default_rng(5)


def _arrays(shapes):
    return [RNG.standard_normal(s).astype(np.float32) for s in shapes]


def _run(fn, arrays, g, dtype=None):
    """fn's value and the gradients of sum(fn(...) * g), on the active backend."""
    ts = [dg.ag_tensor(a, requires_grad=True, dtype=dtype) for a in arrays]
    with dg.with_grad_tape():
        y = fn(*ts)
        dg.sum(y * dg.ag_tensor(g, dtype=dtype)).backward()
    return y.numpy(), [t.grad.numpy() for t in ts]


def _check(fn, arrays, terms: int):
    """fn on the active backend against fn in float64 on the cpu (values and gradients),
    each within the matmul bound of ``terms`` summed products: gamma(terms) times the
    same computation on the magnitudes."""
    backend = dg.ag_device()
    shape = fn(*[dg.ag_tensor(a) for a in arrays]).shape
    g = RNG.standard_normal(shape).astype(np.float32)
    y, grads = _run(fn, arrays, g)
    dg.ag_device("cpu")
    try:
        wide = [a.astype(np.float64) for a in arrays]
        ref, ref_grads = _run(fn, wide, g.astype(np.float64), "float64")
        scale, scale_grads = _run(fn, [np.abs(a) for a in wide], np.abs(g.astype(np.float64)),
                                  "float64")
    finally:
        dg.ag_device(backend)
    assert y.shape == ref.shape
    tolerances.assert_agree("matmul", y, ref, scale=scale, length=max(terms, 1))
    for got, want, s in zip(grads, ref_grads, scale_grads):
        tolerances.assert_agree("matmul", got, want, scale=s, length=max(terms, 1))


# -- matmul's rules ---------------------------------------------------------------------------
@pytest.mark.parametrize("sa, sb", [
    ((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)), ((2, 4, 5), (5,)), ((5,), (2, 5, 3)),
    ((2, 1, 4, 5), (3, 5, 2)), ((2, 3, 4, 5), (5, 2)), ((4, 5), (2, 3, 5, 2)),
    ((1, 2, 4, 5), (3, 1, 5, 2)), ((2, 2, 2, 1, 4, 5), (2, 5, 3)),
])
def test_matmul_follows_torch_matmul_rules(device, sa, sb):
    a, b = _arrays((sa, sb))
    assert dg.matmul(dg.ag_tensor(a), dg.ag_tensor(b)).shape == np.matmul(a, b).shape
    _check(lambda x, y: x @ y, [a, b], sa[-1])


def test_matmul_of_empty_stacks_and_an_empty_inner_dimension(device):
    a, b = np.zeros((0, 3, 4), np.float32), np.ones((4, 2), np.float32)
    assert dg.matmul(dg.ag_tensor(a), dg.ag_tensor(b)).shape == (0, 3, 2)
    y = dg.matmul(dg.ag_tensor(np.ones((2, 3, 0), np.float32)),
                  dg.ag_tensor(np.ones((2, 0, 5), np.float32)))
    np.testing.assert_array_equal(y.numpy(), np.zeros((2, 3, 5), np.float32))


def test_a_4d_product_under_autocast_is_rounded_like_a_3d_one(device):
    a, b = _arrays(((2, 3, 4, 8), (2, 3, 8, 5)))
    with dg.autocast("bfloat16"):
        four = dg.matmul(dg.ag_tensor(a), dg.ag_tensor(b))
        three = dg.matmul(dg.ag_tensor(a.reshape(6, 4, 8)), dg.ag_tensor(b.reshape(6, 8, 5)))
    assert four.dtype == dg.bfloat16
    np.testing.assert_array_equal(four.float().numpy().reshape(6, 4, 5),
                                  three.float().numpy())


@pytest.mark.parametrize("sa, sb, pattern", [
    ((), (2, 2), r"^matmul: argument 'a' has shape \(\)"),
    ((3,), (), r"^matmul: argument 'b' has shape \(\)"),
    ((2, 3), (4, 5), r"^matmul: inner dimensions differ"),
    ((3,), (4,), r"^matmul: inner dimensions differ"),
    ((2, 3, 4), (3, 4, 5), r"^matmul: batch sizes differ"),
])
def test_matmul_errors_name_the_operand(device, sa, sb, pattern):
    a, b = (dg.ag_tensor(np.ones(s, np.float32)) for s in (sa, sb))
    with pytest.raises(dg.ShapeError, match=pattern):
        dg.matmul(a, b)


# -- the named products -----------------------------------------------------------------------
@pytest.mark.parametrize("fn, shapes, terms", [
    (dg.mm, ((3, 4), (4, 5)), 4),
    (dg.bmm, ((2, 3, 4), (2, 4, 5)), 4),
    (dg.mv, ((3, 4), (4,)), 4),
    (dg.dot, ((6,), (6,)), 6),
    (dg.outer, ((3,), (4,)), 1),
    (lambda c, a, b: dg.addmm(c, a, b, beta=0.5, alpha=2.0), ((3, 5), (3, 4), (4, 5)), 6),
    (lambda c, a, b: dg.addmm(c, a, b), ((5,), (3, 4), (4, 5)), 5),
    (lambda a, b: dg.tensordot(a, b, 2), ((2, 3, 4), (3, 4, 5)), 12),
    (lambda a, b: dg.tensordot(a, b, ([0, 2], [2, 0])), ((2, 3, 4), (4, 5, 2)), 8),
    (lambda a, b: dg.tensordot(a, b, 0), ((2,), (3,)), 1),
], ids=["mm", "bmm", "mv", "dot", "outer", "addmm", "addmm broadcast", "tensordot 2",
        "tensordot lists", "tensordot 0"])
def test_named_products(device, fn, shapes, terms):
    arrays = _arrays(shapes)
    _check(fn, arrays, terms)


def test_named_products_match_numpy_shapes():
    a, b, v = (dg.ag_tensor(x) for x in _arrays(((3, 4), (4, 5), (4,))))
    assert dg.outer(v, v).shape == (4, 4) and dg.dot(v, v).shape == ()
    assert dg.tensordot(dg.ag_tensor(np.ones((2, 3, 4), np.float32)),
                        dg.ag_tensor(np.ones((4, 3, 5), np.float32)),
                        ([1, 2], [1, 0])).shape == (2, 5)
    np.testing.assert_array_equal(dg.addmm(dg.ones(3, 5) * np.nan, a, b, beta=0).numpy(),
                                  dg.mm(a, b).numpy())      # beta 0: input ignored, NaN too


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: dg.mm(dg.ones(2, 3, 4), dg.ones(4, 2)), dg.ShapeError, r"^mm: argument 'input'"),
    (lambda: dg.bmm(dg.ones(2, 3, 4), dg.ones(4, 2)), dg.ShapeError, r"^bmm: argument 'mat2'"),
    (lambda: dg.bmm(dg.ones(2, 3, 4), dg.ones(3, 4, 2)), dg.ShapeError, r"^bmm: batch sizes"),
    (lambda: dg.mv(dg.ones(2, 3), dg.ones(3, 1)), dg.ShapeError, r"^mv: argument 'vec'"),
    (lambda: dg.dot(dg.ones(3), dg.ones(4)), dg.ShapeError, r"^dot: lengths differ"),
    (lambda: dg.outer(dg.ones(3, 1), dg.ones(4)), dg.ShapeError, r"^outer: argument 'input'"),
    (lambda: dg.addmm(dg.ones(3), dg.ones(2, 3), dg.ones(3, 2), beta="x"),
     dg.ArgumentTypeError, r"^addmm: argument 'beta'"),
    (lambda: dg.tensordot(dg.ones(2, 3), dg.ones(3, 2), 3), dg.InvalidValueError,
     r"^tensordot: argument 'dims' is 3"),
    (lambda: dg.tensordot(dg.ones(2, 3), dg.ones(3, 2), ([0], [0])), dg.ShapeError,
     r"^tensordot: axis 0 of a"),
    (lambda: dg.tensordot(dg.ones(2, 3), dg.ones(3, 2), ([1], [0, 1])), dg.InvalidValueError,
     r"^tensordot: argument 'dims'"),
])
def test_named_product_errors(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# -- einsum -----------------------------------------------------------------------------------
EINSUM = [
    ("ij,jk->ik", ((2, 3), (3, 4))),
    ("ij,jk", ((2, 3), (3, 4))),
    ("bhqd,bhkd->bhqk", ((2, 3, 4, 5), (2, 3, 6, 5))),
    ("ii", ((3, 3),)),
    ("ii->i", ((3, 3),)),
    ("iij->j", ((3, 3, 2),)),
    ("ij->ji", ((2, 3),)),
    ("ij->", ((2, 3),)),
    ("i,i", ((4,), (4,))),
    ("i,j->ij", ((3,), (4,))),
    ("...ij,...jk->...ik", ((2, 1, 3, 4), (5, 4, 2))),
    ("...ij,jk->ik", ((2, 3, 4), (4, 5))),      # ('...' left out of the output: summed)
    ("bA,aB", ((2, 3), (4, 5))),
    ("ij,jk,kl->il", ((2, 3), (3, 4), (4, 5))),
    ("i,j,k->ijk", ((2,), (3,), (4,))),
    ("ijk,ikj->i", ((2, 3, 4), (2, 4, 3))),
    ("ij,ij->ij", ((2, 3), (2, 3))),
    ("ij,jk->ik", ((2, 1), (3, 4))),
    (" b i d , b j d -> b i j ", ((2, 3, 4), (2, 5, 4))),
]


@pytest.mark.parametrize("equation, shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_agrees_with_numpy(device, equation, shapes):
    arrays = _arrays(shapes)
    wide = [a.astype(np.float64) for a in arrays]
    # NumPy's einsum neither broadcasts a length-1 axis against a longer one nor sums the
    # axes of a '...' the output leaves out, as PyTorch's does: those are spelled out for it
    if equation == "...ij,jk->ik":
        want = np.einsum("aij,jk->ik", *wide)
    elif equation == "ij,jk->ik" and shapes[0] == (2, 1):
        want = np.einsum(equation, np.broadcast_to(wide[0], (2, 3)), wide[1])
    else:
        want = np.einsum(equation.replace(" ", ""), *wide)
    got = dg.einsum(equation, *[dg.ag_tensor(a) for a in arrays])
    assert got.shape == want.shape
    terms = math.prod(n for s in shapes for n in s)
    tolerances.assert_agree("matmul", got.numpy(), want, scale=np.abs(want) + terms,
                            length=terms)
    _check(lambda *ts: dg.einsum(equation, *ts), arrays, terms)


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", ((2, 3), (3, 4))), ("ii->i", ((3, 3),)), ("...ij,jk->ik", ((2, 3, 4), (4, 2))),
    ("ij,jk,kl->il", ((2, 3), (3, 2), (2, 2))), ("bA,aB", ((2, 3), (2, 2)))])
def test_einsum_gradients_in_float64(equation, shapes):
    assert dg.gradcheck(lambda *ts: dg.einsum(equation, *ts),
                        tuple(RNG.standard_normal(s) for s in shapes))


def test_einsum_takes_a_list_and_its_method_names():
    a, b = (dg.ag_tensor(x) for x in _arrays(((2, 3), (3, 4))))
    np.testing.assert_array_equal(dg.einsum("ij,jk", [a, b]).numpy(),
                                  dg.einsum("ij,jk", a, b).numpy())


@pytest.mark.parametrize("equation, shapes, error, pattern", [
    ("ij,jk", ((2, 3),), dg.InvalidValueError, r"2 operand subscripts; 1 operands"),
    ("ij->k", ((2, 3),), dg.InvalidValueError, r"output subscript k is in no operand"),
    ("ij->ii", ((2, 3),), dg.InvalidValueError, r"output subscript i appears more than once"),
    ("ijk", ((2, 3),), dg.InvalidValueError, r"operand 0 has 2 axes"),
    ("i1", ((2, 3),), dg.InvalidValueError, r"subscripts are letters"),
    ("ij->i->j", ((2, 3),), dg.InvalidValueError, r"more than one '->'"),
    ("ij,jk", ((2, 3), (4, 5)), dg.ShapeError,
     r"subscript j has length 3 in operand 0 and 4 in operand 1"),
    ("ii", ((2, 3),), dg.ShapeError, r"subscript i is repeated"),
])
def test_einsum_errors(equation, shapes, error, pattern):
    with pytest.raises(error, match=pattern):
        dg.einsum(equation, *[dg.ones(*s) for s in shapes])
    with pytest.raises(dg.ArgumentTypeError, match=r"^einsum: argument 'equation'"):
        dg.einsum(3, dg.ones(2))


def test_einsum_in_a_captured_step_replays(device):
    w = dg.ag_param(_arrays(((4, 3),))[0])
    opt = dg.optim.SGD([w], lr=0.1)

    def step(x):
        with dg.with_grad_tape():
            loss = dg.einsum("bi,ij->", dg.ag_tensor(x), dg.einsum("ji->ij", w))
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    captured = dg.capture_step(step)
    x = np.ones((2, 3), np.float32)
    before = w.numpy().copy()
    for _ in range(3):
        captured(x)
    # each step subtracts 0.1 * (column sums of x, 2 each) from every weight
    np.testing.assert_allclose(w.numpy(), before - 3 * 0.1 * 2, rtol=0, atol=1e-6)


# -- diagonals --------------------------------------------------------------------------------
@pytest.mark.parametrize("offset, dim1, dim2", [(0, 0, 1), (1, 1, 2), (-1, 2, 1), (2, 0, 2),
                                                 (5, 1, 2), (-2, -1, 0)])
def test_diagonal_as_numpy(device, offset, dim1, dim2):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = dg.diagonal(dg.ag_tensor(x), offset, dim1, dim2)
    np.testing.assert_array_equal(got.numpy(), np.diagonal(x, offset, dim1, dim2))


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diag_and_trace_as_numpy(device, k):
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.array([1.5, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(dg.diag(dg.ag_tensor(v), k).numpy(), np.diag(v, k))
    np.testing.assert_array_equal(dg.diag(dg.ag_tensor(m), k).numpy(), np.diag(m, k))
    assert dg.trace(dg.ag_tensor(m)).item() == np.trace(m)
    assert dg.ag_tensor(m).diagonal(k).shape == np.diagonal(m, k).shape


def test_diagonal_gradients_in_float64():
    assert dg.gradcheck(lambda t: dg.diagonal(t, 1, 0, 2) * 2, RNG.standard_normal((3, 2, 4)))
    assert dg.gradcheck(lambda t: dg.diag(t, -1), RNG.standard_normal(3))
    assert dg.gradcheck(dg.trace, RNG.standard_normal((3, 2)))


def test_diagonal_errors():
    with pytest.raises(dg.ShapeError, match=r"^diagonal: argument 'input'"):
        dg.diagonal(dg.ones(3))
    with pytest.raises(dg.InvalidValueError, match=r"^diagonal: dim1 and dim2"):
        dg.diagonal(dg.ones(2, 2), 0, 1, -1)
    with pytest.raises(dg.ShapeError, match=r"^trace: argument 'input'"):
        dg.trace(dg.ones(2, 2, 2))
    with pytest.raises(dg.ShapeError, match=r"^diag: argument 'input'"):
        dg.diag(dg.ones(2, 2, 2))


@pytest.mark.parametrize("p, rows", [(2.0, (30, 40)), (2.0, (5, 7)), (1.0, (6, 4)),
                                     (3.0, (3, 5))])
def test_cdist_as_numpy(device, p, rows):
    a = RNG.standard_normal((2, rows[0], 5)).astype(np.float32)
    b = RNG.standard_normal((2, rows[1], 5)).astype(np.float32)
    want = (np.abs(a[:, :, None].astype(np.float64) - b[:, None]) ** p).sum(-1) ** (1 / p)
    got = dg.cdist(dg.ag_tensor(a), dg.ag_tensor(b), p)
    assert got.shape == (2,) + rows
    # the product form (more than 25 rows) loses up to |a|^2 + |b|^2 cancelled digits
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=2e-6 * (1 + want.max() ** 2))
    assert dg.gradcheck(lambda x, y: dg.cdist(x, y, p), (a[0, :4].astype(np.float64),
                                                          b[0, :3].astype(np.float64)))
