"""Boolean and integer tensors: comparisons, tests, logical ops, where, masked_fill,
any/all and conversions, against NumPy on both backends (bools a byte each, integer tensors
int32)."""
import numpy as np
import pytest

import dualgrad as dg
from conftest import assert_layer_step_replays

SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 3e38, 1e-40, 1.5],
                   np.float32)


def t(a, **kw):
    return dg.ag_tensor(a, **kw)


COMPARISONS = {"eq": (dg.eq, np.equal, lambda a, b: a == b),
               "ne": (dg.ne, np.not_equal, lambda a, b: a != b),
               "lt": (dg.lt, np.less, lambda a, b: a < b),
               "le": (dg.le, np.less_equal, lambda a, b: a <= b),
               "gt": (dg.gt, np.greater, lambda a, b: a > b),
               "ge": (dg.ge, np.greater_equal, lambda a, b: a >= b)}


@pytest.mark.parametrize("op", list(COMPARISONS))
def test_comparisons_match_numpy_with_nan_signed_zeros_and_broadcasting(device, op):
    fn, ref, operator = COMPARISONS[op]
    x, y = SPECIAL[:, None], SPECIAL[None, :]
    for got in (fn(t(x), t(y)), operator(t(x), t(y))):
        assert got.dtype == np.bool_ and got.shape == (10, 10)
        np.testing.assert_array_equal(got.numpy(), ref(x, y))
    np.testing.assert_array_equal(operator(t(x), 1.5).numpy(), ref(x, np.float32(1.5)))
    np.testing.assert_array_equal(operator(1.5, t(y)).numpy(), ref(np.float32(1.5), y))
    ints = np.array([-2 ** 31, -1, 0, 7, 2 ** 31 - 1], np.int32)
    np.testing.assert_array_equal(operator(t(ints, dtype="int32"), 7).numpy(), ref(ints, 7))
    # an int32 tensor beside a float number compares as float, as in PyTorch
    np.testing.assert_array_equal(operator(t(ints, dtype="int32"), 6.5).numpy(),
                                  ref(ints.astype(np.float32), np.float32(6.5)))


def test_tests_of_floats_and_of_integers(device):
    x = t(SPECIAL)
    np.testing.assert_array_equal(dg.isnan(x).numpy(), np.isnan(SPECIAL))
    np.testing.assert_array_equal(x.isinf().numpy(), np.isinf(SPECIAL))
    np.testing.assert_array_equal(dg.isfinite(x).numpy(), np.isfinite(SPECIAL))
    i = t([3, -4], dtype="int32")
    assert dg.isnan(i).numpy().tolist() == [False, False]
    assert dg.isfinite(i).numpy().tolist() == [True, True]


def test_logical_ops_of_booleans(device):
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    ta, tb = t(a, dtype=bool), t(b, dtype=bool)
    np.testing.assert_array_equal((ta & tb).numpy(), a & b)
    np.testing.assert_array_equal((ta | tb).numpy(), a | b)
    np.testing.assert_array_equal((ta ^ tb).numpy(), a ^ b)
    np.testing.assert_array_equal((~ta).numpy(), ~a)
    np.testing.assert_array_equal((a & tb).numpy(), a & b)          # an array on the left
    # logical_* take any dtype: nonzero is true (NaN too)
    np.testing.assert_array_equal(dg.logical_and(t([0.0, np.nan, 2.0]), 1).numpy(),
                                  [False, True, True])
    np.testing.assert_array_equal(dg.logical_not(t([0, 5], dtype="int32")).numpy(),
                                  [True, False])
    with pytest.raises(dg.ArgumentTypeError, match="no bitwise ops"):
        t([1.0]) & tb[:1]


def test_where_selects_broadcasts_and_routes_the_gradient(device):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4,))
    cond = a > 0.2
    ta, tb = t(a, requires_grad=True), t(b, requires_grad=True)
    g = rng.standard_normal((3, 4)).astype(np.float32)
    with dg.with_grad_tape():
        y = dg.where(ta > 0.2, ta, tb)
        dg.sum(y * t(g)).backward()
    np.testing.assert_array_equal(y.numpy(), np.where(cond, a, b).astype(np.float32))
    np.testing.assert_allclose(ta.grad.numpy(), np.where(cond, g, 0), rtol=1e-6)
    np.testing.assert_allclose(tb.grad.numpy(), np.where(cond, 0, g).sum(0), rtol=1e-5)
    # numbers on either side, NaN and inf kept as they are, int32 values
    x = t(SPECIAL)
    np.testing.assert_array_equal(dg.where(dg.isnan(x), 0.0, x).numpy(),
                                  np.where(np.isnan(SPECIAL), 0, SPECIAL))
    np.testing.assert_array_equal(np.signbit(dg.where(x == 0, x, 1.0).numpy()),
                                  np.signbit(np.where(SPECIAL == 0, SPECIAL, 1.0)))
    ints = dg.where(t([True, False], dtype=bool), t([1, 2], dtype="int32"), -9)
    assert ints.dtype == np.int32 and ints.numpy().tolist() == [1, -9]
    with pytest.raises(dg.ArgumentTypeError, match=r"^where: argument 'condition'"):
        dg.where(x, x, x)
    with pytest.raises(dg.ShapeError, match=r"^where: shapes"):
        dg.where(x > 0, t(np.ones(3)), x)


def test_where_and_masked_fill_gradients_by_finite_differences():
    mask = np.array([[True, False, True], [False, False, True]])
    dg.gradcheck(lambda a, b: dg.where(mask, a, b),
                 [np.arange(6.0).reshape(2, 3), np.array([0.5, -1.0, 2.0])])
    dg.gradcheck(lambda a: dg.masked_fill(a, mask, 3.0) * a, [np.arange(6.0).reshape(2, 3)])


def test_masked_fill(device):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = t(x).masked_fill(t(x) > 2, -np.inf)
    np.testing.assert_array_equal(got.numpy(), np.where(x > 2, -np.inf, x))
    row = np.array([True, False, True])
    np.testing.assert_array_equal(dg.masked_fill(t(x), row, 9.0).numpy(),
                                  np.where(row, 9.0, x))
    assert t([1, 2], dtype="int32").masked_fill(np.array([True, False]), 5).numpy().tolist() \
        == [5, 2]
    with pytest.raises(dg.ShapeError, match=r"^masked_fill: argument 'mask'"):
        dg.masked_fill(t(x[0]), np.ones((2, 3), bool), 0.0)


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), ((0, 1), True)])
def test_any_and_all(device, dim, keepdim):
    x = np.array([[0.0, 0.0, 1.0], [0.0, np.nan, 0.0]], np.float32)
    np_dim = dim if dim is not None else None
    np.testing.assert_array_equal(dg.any(t(x), dim, keepdim).numpy(),
                                  np.any(x != 0, axis=np_dim, keepdims=keepdim))
    np.testing.assert_array_equal(t(x).all(dim, keepdim).numpy(),
                                  np.all(x != 0, axis=np_dim, keepdims=keepdim))
    empty = t(np.zeros((2, 0)))
    assert dg.any(empty).item() is False and dg.all(empty).item() is True


def test_conversions_truncate_saturate_and_keep_gradients_between_floats(device):
    x = t([1.7, -1.7, np.nan, 1e10, -1e10, np.inf, 0.0])
    assert x.int().numpy().tolist() == [1, -1, 0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, 0]
    assert x.bool().numpy().tolist() == [True, True, True, True, True, True, False]
    assert x.to("int32").dtype == np.int32 and x.long().dtype == np.int32
    big = t([2 ** 31 - 1, -3], dtype="int32")
    assert big.float().numpy().tolist() == [2.0 ** 31, -3.0]     # rounded to nearest
    assert t([True, False], dtype=bool).float().numpy().tolist() == [1.0, 0.0]
    if device == "cpu":
        w = t([1.5, 2.5], requires_grad=True)
        with dg.with_grad_tape():
            dg.sum(w.double() * 2.0).backward()
        assert w.grad.dtype == np.float32 and w.grad.numpy().tolist() == [2.0, 2.0]
    else:
        with pytest.raises(dg.ArgumentTypeError, match="float64"):
            x.double()


def test_integer_and_boolean_tensors(device):
    i = t(np.array([5, -2]), dtype="int32")
    assert i.dtype == np.int32 and i.numpy().dtype == np.int32
    assert t([7], dtype="int32").item() == 7 and isinstance(t([7], dtype="int32").item(), int)
    b = t([True], dtype=bool)
    assert b.item() is True and bool(b) and b.numpy().dtype == np.bool_
    assert (t([1.0, 2.0]) > 1).reshape(2, 1).dtype == np.bool_
    assert "dtype=bool" in repr(b) and "True" in repr(b)
    with pytest.raises(dg.InvalidValueError, match=r"^ag_tensor: argument 'array'.*int32"):
        t(np.array([2 ** 40]), dtype="int32")
    with pytest.raises(dg.InvalidValueError, match=r"^ag_tensor: argument 'requires_grad'"):
        t([1], dtype="int32", requires_grad=True)
    assert t([1], dtype="int64").dtype == np.int32 and t([1], dtype=dg.long).dtype == np.int32
    with pytest.raises(dg.ArgumentTypeError, match=r"^gelu: argument 'x' is a int32 tensor"):
        dg.gelu(i)                          # (PyTorch's activations refuse integers too)


INTS = np.array([-3, -1, 0, 2, 5, -2 ** 31, 2 ** 31 - 1], np.int32)


@pytest.mark.parametrize("name", sorted(dg.api.ops.FLOAT_OF_INTEGERS))
def test_float_functions_of_integers_give_float32_as_pytorchs(device, name):
    # torch.exp(int_tensor) and the like compute in the default float type
    for a in (INTS, INTS > 0):
        got = getattr(dg, name)(dg.tensor(a))
        assert got.dtype == np.float32 and not got.requires_grad
        want = getattr(dg, name)(dg.tensor(a.astype(np.float32)))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(getattr(dg.tensor(a), name)().numpy(), want.numpy())


@pytest.mark.parametrize("name, rule", [
    ("neg", lambda a: -a), ("abs", np.abs), ("relu", lambda a: np.maximum(a, 0)),
    ("square", lambda a: a * a), ("sign", np.sign), ("floor", lambda a: a),
    ("ceil", lambda a: a), ("round", lambda a: a), ("trunc", lambda a: a)])
def test_integer_functions_of_integers_stay_int32_as_pytorchs(device, name, rule):
    # (int32 arithmetic wraps: -INT_MIN and INT_MAX squared are int32's)
    for a in (INTS, INTS > 0):
        x = dg.tensor(a)
        got = getattr(dg, name)(x)
        assert got.dtype == np.int32
        with np.errstate(over="ignore"):
            want = rule(a.astype(np.int64)).astype(np.int32)
        np.testing.assert_array_equal(got.numpy(), want)
    y = dg.floor(x)
    y.fill_(7)                              # a new tensor, not x itself
    np.testing.assert_array_equal(x.numpy(), INTS > 0)


@pytest.mark.parametrize("call, name", [
    (lambda i, m, v: i + v, "add: argument 'b'"),
    (lambda i, m, v: v * i, "mul: argument 'a'"),
    (lambda i, m, v: i // v, "floor_divide: argument 'b'"),
    (lambda i, m, v: i == v, "eq: argument 'other'"),
    (lambda i, m, v: dg.where(m, i, v), "where: argument 'other'"),
    (lambda i, m, v: dg.masked_fill(i, m, v), "masked_fill: argument 'value'"),
    (lambda i, m, v: i.fill_(v), "fill_: argument 'value'"),
    (lambda i, m, v: i.__setitem__(0, v), "setitem: argument 'value'"),
    (lambda i, m, v: dg.full((2,), v, dtype="int32"), "full: argument 'fill_value'"),
])
@pytest.mark.parametrize("value", [2 ** 31, -2 ** 31 - 1, 2 ** 40, np.int64(2 ** 40),
                                   float("inf"), float("nan")])
def test_numbers_an_int32_tensor_cannot_hold_are_refused_alike(device, call, name, value):
    i, m = t([5, -2], dtype="int32"), t([True, False], dtype=bool)
    if isinstance(value, float) and name.split(":")[0] in ("add", "mul", "floor_divide", "eq",
                                                             "where"):
        kind = np.bool_ if name.startswith("eq") else np.float32   # (computed in float32)
        assert call(i, m, value).dtype == kind
        return
    with pytest.raises(dg.InvalidValueError, match="^" + name):
        call(i, m, value)
    assert i.numpy().tolist() == [5, -2]
    assert (i + (2 ** 31 - 1)).numpy().tolist() == [-2 ** 31 + 4, 2 ** 31 - 3]   # (wraps)
    assert dg.full((1,), -2 ** 31 - 0.5, dtype="int32").item() == -2 ** 31     # (truncated)


def test_a_reductions_dtype_converts_its_input_first_as_pytorchs(device):
    i = t([1, 2, 2 ** 30, 2 ** 30], dtype="int32")
    assert i.sum().item() == -2 ** 31 + 3                      # (int32 wraps)
    total = i.sum(dtype=dg.float32)                            # (converted, then summed)
    assert total.dtype == np.float32 and total.item() == 2.0 ** 31
    assert t([True, True, False], dtype=bool).mean(dtype="float32").item() == np.float32(2 / 3)
    with pytest.raises(dg.ArgumentTypeError, match=r"^Tensor.sum: argument 'dtype'"):
        i.sum(dtype="complex64")


def test_tensors_hash_by_identity_as_pytorchs(device):
    a, b = t([1.0, 2.0]), t([1.0, 2.0])
    seen = {a: "a", b: "b"}
    assert seen[a] == "a" and seen[b] == "b" and len({a, b, a}) == 2


@pytest.mark.gpu
def test_a_captured_step_with_a_mask_replays_as_eager_steps(gpu):
    assert_layer_step_replays(
        lambda h: dg.sum(dg.where(h > 0, h, 0.1 * h).masked_fill(h < -1, 0.0)), 6, seed=3)


@pytest.mark.gpu
def test_a_captured_step_counting_with_an_integer_sum_replays_as_eager_steps(gpu):
    # (the count, each batch's own, is part of the loss the replays must give again)
    assert_layer_step_replays(lambda h: dg.sum(h * h) + (h > 0).sum(dim=1).float().sum(),
                              6, seed=4)


def test_boolean_and_integer_tensors_index_and_serve_as_targets(device):
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    tx = t(x, requires_grad=True)
    with dg.with_grad_tape():
        picked = tx[tx > 0]
        dg.sum(picked * 2.0).backward()
    np.testing.assert_array_equal(picked.numpy(), x[x > 0])
    np.testing.assert_array_equal(tx.grad.numpy(), np.where(x > 0, 2.0, 0.0))
    rows = t([1, 0, 1], dtype="int32")
    np.testing.assert_array_equal(t(x)[rows].numpy(), x[[1, 0, 1]])
    loss = dg.softmax_cross_entropy(t(x), t([2, 1], dtype="int32"))
    assert loss.item() == pytest.approx(dg.softmax_cross_entropy(t(x), np.array([2, 1])).item())
    with pytest.raises(dg.ArgumentTypeError, match="a float tensor cannot index"):
        t(x)[t([0.0])]
    with pytest.raises(dg.ArgumentTypeError, match=r"not a bool tensor"):
        dg.softmax_cross_entropy(t(x), t([True, False], dtype=bool))


def test_integer_and_boolean_tensors_are_indexed_by_arrays_and_masks(device):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    a[0, 0], a[2, 3] = -2 ** 31, 1                     # (bit patterns of subnormal floats)
    flags = a % 3 == 0
    ta, tf = t(a, dtype="int32"), t(flags, dtype=bool)
    for key in (np.array([0, 2, 0]), (slice(None), np.array([1, 3])), ta > 5,
                t([2, 0], dtype="int32"), (Ellipsis, np.array([[0], [3]]))):
        host = key.numpy() if isinstance(key, dg.Tensor) else key
        got, got_flags = ta[key], tf[key]
        assert got.dtype == np.int32 and got_flags.dtype == np.bool_
        np.testing.assert_array_equal(got.numpy(), a[host])
        np.testing.assert_array_equal(got_flags.numpy(), flags[host])
    np.testing.assert_array_equal(dg.index_select(tf, 1, np.array([3, 0])).numpy(),
                                  flags[:, [3, 0]])


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,dim", [((4, 5), 1), ((4, 5), 0), ((2, 3, 4), -1),
                                       ((7,), None), ((3, 70000), 1), ((200000,), 0),
                                       ((2, 9003), 1)])
def test_argmax_and_argmin_give_the_first_extremum_nan_included(device, op, shape, dim):
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(-2, 3, shape).astype(np.float32)       # many ties
    if x.size > 100:
        x.reshape(-1)[[x.size // 3, x.size // 2]] = np.nan
    got = getattr(dg, op)(t(x), dim)
    want = getattr(np, op)(x, axis=dim)
    assert got.dtype == np.int32 and got.shape == np.shape(want)
    np.testing.assert_array_equal(got.numpy(), want)
    kept = getattr(t(x), op)(dim, keepdim=True)
    assert kept.shape == (np.expand_dims(want, dim).shape if dim is not None
                          else (1,) * x.ndim)
    ints = t(rng.integers(-5, 5, shape), dtype="int32")
    np.testing.assert_array_equal(getattr(dg, op)(ints, dim).numpy(),
                                  getattr(np, op)(ints.numpy(), axis=dim))
    # The extreme ints, and zeros of both signs (equal: the first one wins).
    edges = rng.integers(-5, 5, shape).astype(np.int32)
    edges.reshape(-1)[[edges.size // 4, edges.size // 3]] = [-2 ** 31, 2 ** 31 - 1]
    np.testing.assert_array_equal(getattr(dg, op)(t(edges, dtype="int32"), dim).numpy(),
                                  getattr(np, op)(edges, axis=dim))
    zeros = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(np.float32)
    np.testing.assert_array_equal(getattr(dg, op)(t(zeros), dim).numpy(),
                                  getattr(np, op)(zeros, axis=dim))


def test_argmax_refuses_nothing_and_several_dims(device):
    with pytest.raises(dg.ShapeError, match=r"^argmax: argument 'input'"):
        dg.argmax(t(np.zeros((0, 3))))
    with pytest.raises(dg.ArgumentTypeError, match=r"^argmin: argument 'dim'"):
        dg.argmin(t(np.zeros((2, 3))), (0, 1))


def test_one_hot(device):
    idx = t([[0, 3], [2, 1]], dtype="int32")
    got = dg.one_hot(idx, 5)
    assert got.dtype == np.int32 and got.shape == (2, 2, 5)
    np.testing.assert_array_equal(got.numpy(), np.eye(5, dtype=np.int32)[idx.numpy()])
    assert dg.one_hot(np.array([1, 0])).numpy().tolist() == [[0, 1], [1, 0]]
    with pytest.raises(dg.InvalidValueError, match=r"^one_hot: argument 'tensor' holds "
                                                   r"index 5"):
        dg.one_hot(np.array([5]), 5)


@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3, 9])
def test_tril_and_triu_keep_a_triangle_and_zero_the_rest_nan_included(device, diagonal):
    x = np.random.default_rng(1).standard_normal((2, 4, 5)).astype(np.float32)
    x[0, 0, 4], x[1, 3, 0] = np.nan, np.inf
    np.testing.assert_array_equal(dg.tril(t(x), diagonal).numpy(),
                                  np.where(np.tril(np.ones((4, 5)), diagonal) > 0, x, 0))
    np.testing.assert_array_equal(t(x).triu(diagonal).numpy(),
                                  np.where(np.triu(np.ones((4, 5)), diagonal) > 0, x, 0))


def test_tril_gradient_and_errors():
    dg.gradcheck(lambda a: dg.tril(a, -1) * a, [np.arange(12.0).reshape(3, 4)])
    dg.gradcheck(lambda a: dg.triu(a, 1), [np.arange(12.0).reshape(3, 4)])
    with pytest.raises(dg.ShapeError, match=r"^tril: argument 'input'"):
        dg.tril(t([1.0, 2.0]))
    assert dg.triu(t(np.ones((2, 2)), dtype=bool)).numpy().tolist() == [[True, True],
                                                                          [False, True]]


def test_views_and_joins_of_integer_and_boolean_tensors_move_their_bits(device):
    # small int32 values are subnormal bit patterns: a copy through float arithmetic on a
    # device that flushes subnormals would zero them
    a = np.array([[1, -2, 3], [2 ** 31 - 1, 0, -(2 ** 31)]], np.int32)
    ta = t(a, dtype="int32")
    b = ta > 0
    cases = [(ta[:, ::-1], a[:, ::-1]), (ta[1], a[1]), (ta.flip(0), a[::-1]),
             (dg.concat([ta, ta[:1]], 0), np.concatenate([a, a[:1]])),
             (dg.stack([ta, ta], -1), np.stack([a, a], -1)),
             (ta.repeat(2, 1), np.tile(a, (2, 1))),
             (dg.roll(ta, 1, 1), np.roll(a, 1, 1)), (ta.unsqueeze(0).squeeze(0), a),
             (dg.broadcast_to(ta[:1], (3, 3)), np.broadcast_to(a[:1], (3, 3))),
             (b[:, 1:], (a > 0)[:, 1:]), (dg.split(b, 1, 0)[1], (a > 0)[1:])]
    for got, want in cases:
        assert got.dtype == want.dtype or (got.dtype == np.bool_ and want.dtype == bool)
        np.testing.assert_array_equal(got.numpy(), want)


# The first pair's broadcast runs in three parts of 1575 elements (past four axes that do
# not fold), the second and third starting inside a word of bools, its operands' too; the
# others read bools at broadcast strides, or flat with 1 to 3 elements past a word.
_BOOL_SHAPES = [((3, 1, 5, 1, 3, 7), (1, 3, 1, 5, 1, 1)), ((2, 3, 1, 1, 3, 5), (3, 1, 1)),
                ((5, 1, 7, 1, 1, 1), (1, 1, 1, 1, 1, 9)), ((13,), (13,)), ((2, 3, 7), ()),
                ((6,), (6,)), ((1, 5), (7, 1))]


@pytest.mark.parametrize("sa,sb", _BOOL_SHAPES)
def test_bools_are_a_byte_each_in_every_layout(device, sa, sb):
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a = rng.integers(-2, 3, sa).astype(np.float32)
    b = rng.integers(-2, 3, sb).astype(np.float32)
    ta, tb = t(a), t(b)
    mask = ta > tb
    assert mask.dtype == np.bool_ and mask.element_size() == 1
    from dualgrad.api import device, residency     # (the storage holds a byte each)
    assert residency.handle(device.active(), mask).nbytes == mask.size
    np.testing.assert_array_equal(mask.numpy(), a > b)
    both = (ta >= 0) & (tb <= 0)
    np.testing.assert_array_equal(both.numpy(), (a >= 0) & (b <= 0))
    np.testing.assert_array_equal(((ta < 0) ^ (tb < 0)).numpy(), (a < 0) ^ (b < 0))
    np.testing.assert_array_equal((~both | (tb == 1)).numpy(),
                                  ~((a >= 0) & (b <= 0)) | (b == 1))
    np.testing.assert_array_equal(dg.where(tb > 0, ta, tb).numpy(), np.where(b > 0, a, b))
    np.testing.assert_array_equal(mask.float().numpy(), (a > b).astype(np.float32))
    np.testing.assert_array_equal(mask.int().numpy(), (a > b).astype(np.int32))
    np.testing.assert_array_equal(mask.int().bool().numpy(), a > b)
    np.testing.assert_array_equal(dg.logical_and(mask, both.int()).numpy(),
                                  (a > b) & (a >= 0) & (b <= 0))
    flipped = mask.flip(-1)                     # (moved as int32 words on the gpu)
    np.testing.assert_array_equal(flipped.numpy(), (a > b)[..., ::-1])
    assert flipped.dtype == np.bool_ and dg.count_nonzero(mask).item() == (a > b).sum()


@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, True), ((0, 2), False),
                                         ((2, 0), True), (-1, False), ((), False)])
def test_sums_of_integers_and_bools_are_exact_int32(device, dim, keepdim):
    rng = np.random.default_rng(3)
    # rows of 300 (a workgroup's run on the gpu) and columns; large values wrap, as int32
    a = rng.integers(-2 ** 31, 2 ** 31, (3, 300, 5)).astype(np.int32)
    axis = None if dim == () else dim
    for x, ref in ((t(a, dtype="int32"), a), (t(a, dtype="int32") > 0, a > 0)):
        got = x.sum(dim=dim, keepdim=keepdim)
        want = np.sum(ref, axis=axis, dtype=np.int32, keepdims=keepdim)
        assert got.dtype == np.int32 and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dim", [None, 1, (0, 2), -1])
def test_maxima_and_minima_of_integers_and_bools_keep_their_dtype(device, op, dim):
    rng = np.random.default_rng(5)
    a = rng.integers(-2 ** 31, 2 ** 31, (3, 300, 5)).astype(np.int32)
    fn, ref, arg = {"max": (dg.max, np.max, np.argmax), "min": (dg.min, np.min, np.argmin)}[op]
    for x, want in ((t(a, dtype="int32"), a), (t(a, dtype="int32") > 0, a > 0)):
        got = fn(x, dim)
        if isinstance(dim, int):                  # (values, indices), as torch.max(x, dim)
            got, indices = got
            np.testing.assert_array_equal(indices.numpy(), arg(want, axis=dim))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), ref(want, axis=dim))
    assert getattr(t(a, dtype="int32"), "a" + op)(1, keepdim=True).shape == (3, 1, 5)
    with pytest.raises(dg.ShapeError, match=f"{op}: argument 'input' has shape"):
        fn(t(np.zeros((2, 0)), dtype="int32"), 1)
    with pytest.raises(dg.ShapeError, match=f"{op}: argument 'x' has shape"):
        getattr(dg, "a" + op)(t(np.zeros((2, 0)), dtype="int32"), 1)


def test_counting_matches_as_pytorch(device):
    pred, y = t([1, 2, 3, 3], dtype="int32"), t([1, 0, 3, 2], dtype="int32")
    correct = (pred == y).sum()
    assert correct.item() == 2 and isinstance(correct.item(), int)
    assert dg.count_nonzero(t(np.ones((2, 3, 1 << 12)))).item() == 3 << 13
    assert dg.sum(t(np.zeros((0, 2)), dtype="int32")).item() == 0
    with pytest.raises(dg.AxisOutOfRange, match="sum: argument .axis."):
        dg.sum(pred == y, 1)
    with pytest.raises(dg.ArgumentTypeError, match="mean: argument 'x' is a bool tensor"):
        dg.mean(pred == y)


def test_the_suite_refuses_bools_given_to_a_kernel_that_moves_words(gpu):
    from dualgrad.api import device
    from dualgrad.gpu.kernels import strided
    backend = device.active()
    mask = backend.upload(np.array([[True, False, True]]))
    with pytest.raises(AssertionError, match="strided.comp was given bool storage"):
        strided.permute(backend.device, mask, (1, 0))
    assert backend.download(backend.permute(mask, (1, 0))).tolist() == [[True], [False],
                                                                        [True]]


def test_gather_and_take_along_dim_move_integers_and_bools_exactly(device):
    a = np.array([[1, -2, 2 ** 30 + 3, 7], [5, 2 ** 31 - 1, -(2 ** 31), 0]], np.int32)
    idx = np.array([[2, 0], [1, 3]])
    for x in (a, a > 2):                 # (int32 past 2^24; small ones are subnormal bits)
        tx = t(x, dtype=x.dtype)
        got = dg.gather(tx, 1, idx)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x, idx, 1))
        np.testing.assert_array_equal(dg.take_along_dim(tx, t(idx, dtype="int32"), 1).numpy(),
                                      np.take_along_axis(x, idx, 1))


def test_integer_arithmetic_wraps_and_floors_as_pythons(device):
    a = np.array([7, -7, 7, -7, 0, -2 ** 31, 2 ** 31 - 1, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, -1, 1, 0], np.int32)
    ta, tb = t(a, dtype="int32"), t(b, dtype="int32")
    nonzero = np.where(b == 0, 1, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((ta // tb).numpy(),
                                      np.where(b == 0, 0, np.floor_divide(a, nonzero)))
        np.testing.assert_array_equal((ta % tb).numpy(),
                                      np.where(b == 0, 0, np.remainder(a, nonzero)))
        np.testing.assert_array_equal((ta + tb).numpy(), a + b)         # wraps
        np.testing.assert_array_equal((ta * tb - 1).numpy(), a * b - 1)
    np.testing.assert_array_equal(dg.maximum(ta, 0).numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal((-ta).numpy(), -a)
    np.testing.assert_array_equal((7 // t([2, -2], dtype="int32")).numpy(), [3, -4])
    assert (ta + 1).dtype == np.int32 and (ta / tb).dtype == np.float32     # true division
    assert (ta + 0.5).numpy().tolist() == (a.astype(np.float32) + 0.5).tolist()
    assert (t([True, True], dtype=bool) + 1).numpy().tolist() == [2, 2]
    assert (ta // 2.0).dtype == np.float32 and (ta // 2.0).numpy().tolist() == \
        np.floor_divide(a.astype(np.float32), 2).tolist()


def test_integer_powers_wrap_as_int32_and_refuse_negative_int_exponents(device):
    # x ** y of integers stays int32 (PyTorch's integer type): the power modulo 2**32, and
    # for y < 0 of a tensor 1 / x ** -y truncated (0 but for x = 1 and -1), as PyTorch's
    x = np.array([3, -3, 7, 2 ** 31 - 1, 0, 0, 1, -1, -1, 2, -2, 5], np.int32)
    y = np.array([40, 41, 2 ** 31 - 1, 3, 0, 5, -7, -3, -4, -1, -2, 1], np.int32)
    want = [((pow(a, b, 2 ** 32) if b >= 0 else (1 if a == 1 else (-1) ** -b if a == -1
                                                  else 0)) + 2 ** 31) % 2 ** 32 - 2 ** 31
            for a, b in zip(x.tolist(), y.tolist())]
    got = t(x, dtype="int32") ** t(y, dtype="int32")
    assert got.dtype == np.int32 and got.numpy().tolist() == want
    i = dg.arange(-3, 4)
    assert (i ** 2).dtype == np.int32 and (i ** 2).numpy().tolist() == [9, 4, 1, 0, 1, 4, 9]
    assert (2 ** i).numpy().tolist() == [0, 0, 0, 1, 2, 4, 8]
    assert i.pow(3).numpy().tolist() == [-27, -8, -1, 0, 1, 8, 27]
    assert (t([True, False], dtype=bool) ** 2).numpy().tolist() == [1, 0]
    assert (i ** 2.0).dtype == np.float32 and (i ** 0.5).dtype == np.float32
    with pytest.raises(dg.InvalidValueError, match=r"^pow: argument 'b' is -1; expected an "
                                                   r"int >= 0"):
        i ** -1


FLOATS = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -7.0, 7.0, 3.0, 0.1, 0.3, 1e20, 1e-20, 1e-40,
                   -1e-44, 3e38, np.inf, -np.inf, np.nan], np.float32)


def same_floats(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape
    both_nan = np.isnan(got) & np.isnan(want)
    np.testing.assert_array_equal(np.where(both_nan, 0, got.view(np.int32)),
                                  np.where(both_nan, 0, want.view(np.int32)))


@pytest.mark.parametrize("name", ["fmod", "remainder", "floor_divide"])
def test_float_fmod_remainder_and_floor_division_as_cs_and_pythons(device, name):
    """fmod as C's (exact), remainder and // as Python's, on every pair of special values
    (signed zeros, subnormals, infinities, NaN) and a spread of ordinary ones."""
    rng = np.random.default_rng(3)
    a = np.concatenate([np.repeat(FLOATS, FLOATS.size),
                        (rng.standard_normal(3000) * 20).astype(np.float32)])
    b = np.concatenate([np.tile(FLOATS, FLOATS.size),
                        (rng.integers(-30, 30, 3000) * 0.1).astype(np.float32)])
    ours = {"fmod": dg.fmod, "remainder": dg.remainder, "floor_divide": dg.floor_divide}[name]
    ref = {"fmod": np.fmod, "remainder": np.remainder, "floor_divide": np.floor_divide}[name]
    with np.errstate(all="ignore"):       # (float64: exact here, then one rounding)
        want = ref(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    if name == "remainder":           # a zero keeps fmod's sign (x's), as PyTorch's
        want = np.where(want == 0, np.copysign(np.float32(0), a), want)
    got = ours(t(a), t(b)).numpy()
    if name == "floor_divide":
        # past 2^29 the quotient is rounded from a float64 (cpu) or float32 one: the bound
        # of the differential check, 3 ULP; exact below
        huge = np.abs(want) >= 2 ** 29
        np.testing.assert_allclose(got[huge], want[huge], rtol=3 * 2.0 ** -23)
        got, want, a, b = got[~huge], want[~huge], a[~huge], b[~huge]
    same_floats(got, want)
    operator = {"fmod": None, "remainder": lambda x, y: x % y,
                "floor_divide": lambda x, y: x // y}[name]
    if operator is not None:
        same_floats(operator(t(a), t(b)).numpy(), want)
        same_floats(operator(t(a), float(b[-1])).numpy(), ours(t(a), t(b[-1:])).numpy())
        same_floats(operator(5.5, t(b)).numpy(), ours(t(np.full(1, 5.5)), t(b)).numpy())


def test_division_by_numbers_past_2_to_the_126(device):
    """A quotient whose divisor is past 2^126 is still the quotient (a device dividing
    through the reciprocal would flush 1/y to 0 there: hypot(3e38, 3e38) was 3e38)."""
    x = np.array([3e38, 1e38, -2e38, 5e37, 7e30, 3e38], np.float32)
    y = np.array([3e38, 9e37, 1e38, -3.3e38, 2.0 ** 127, np.inf], np.float32)
    want = (x.astype(np.float64) / y).astype(np.float32)
    got = (t(x) / t(y)).numpy()
    np.testing.assert_allclose(got, want, rtol=3 * 2.0 ** -23)
    assert got[0] == 1.0 and got[-1] == 0.0
    assert dg.hypot(t(x[:1]), t(x[:1])).numpy()[0] == np.inf
    # ... and with a number on either side
    np.testing.assert_allclose((t(x) / 3e38).numpy(), (x / np.float64(3e38)).astype(np.float32),
                               rtol=3 * 2.0 ** -23)
    np.testing.assert_allclose((3e38 / t(y[:-1])).numpy(),
                               (np.float64(3e38) / y[:-1]).astype(np.float32), rtol=3 * 2.0 ** -23)


def test_gradients_of_fmod_and_remainder_use_the_exact_quotients(device):
    x = np.array([1.0, -7.5, 7.5, 0.25], np.float32)
    y = np.array([0.1, 2.0, -2.0, 3.0], np.float32)
    # -dL/dy is the quotient truncated (fmod) or floored (remainder), exact: 1 / float32(0.1)
    # is 9.99999985, so 9 (PyTorch rounds the division to 10 first)
    for fn, quotient in ((dg.fmod, [9.0, -3.0, -3.0, 0.0]), (dg.remainder, [9.0, -4.0, -4.0, 0.0])):
        with dg.with_grad_tape():
            tx, ty = t(x, requires_grad=True), t(y, requires_grad=True)
            dg.sum(fn(tx, ty)).backward()
        np.testing.assert_array_equal(tx.grad.numpy(), np.ones(4))
        np.testing.assert_array_equal(ty.grad.numpy(), -np.array(quotient))
    with dg.with_grad_tape():
        tx = t(x, requires_grad=True)
        dg.sum(tx // 2.0).backward()
    np.testing.assert_array_equal(tx.grad.numpy(), np.zeros(4))


@pytest.mark.parametrize("fn", [dg.fmod, dg.remainder], ids=["fmod", "remainder"])
def test_fmod_and_remainder_gradients_by_finite_differences(fn):
    x = np.array([[1.3, -7.7, 7.4], [0.4, 5.1, -2.2]])
    y = np.array([[0.7, 2.1, -1.9], [3.3, -1.3, 0.9]])
    dg.gradcheck(fn, [x, y])


@pytest.mark.parametrize("shape", [(7, 257), (2, 8193), (1, 100_003), (3, 4099 * 4)])
def test_int32_reductions_of_rows_of_every_length(device, shape):
    # rows of one run each (written directly) and of several (partial results combined
    # by the row's last run in, its counter left at zero: the second call agrees)
    a = np.random.default_rng(11).integers(-2 ** 31, 2 ** 31, shape).astype(np.int32)
    x = t(a, dtype="int32")
    for _ in range(2):
        np.testing.assert_array_equal(x.sum(1).numpy(), a.sum(1, dtype=np.int32))
        np.testing.assert_array_equal(x.amax(1).numpy(), a.max(1))
        np.testing.assert_array_equal(x.amin(-1, keepdim=True).numpy(), a.min(1, keepdims=True))
        np.testing.assert_array_equal(dg.amax(x).numpy(), a.max())
