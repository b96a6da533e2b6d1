"""min, var, std, logsumexp and norm against NumPy on both backends, their gradients by
finite differences and on the gpu against the cpu, special values and bad arguments."""
import math

import numpy as np
import pytest

import dualgrad as dg
from conftest import assert_layer_step_replays

X = np.random.default_rng(5).standard_normal((4, 5, 3)) * 3.0
X[1, 2, 0] = X[1, 3, 0]                                 # a tie for min


def np_lse(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=axis)


CASES = {
    "min": (lambda t: dg.min(t, 1).values, lambda x: np.min(x, 1)),
    "min-all": (lambda t: t.min(), lambda x: np.min(x)),
    "min-keep": (lambda t: dg.min(t, dim=(0, 2), keepdim=True),
                 lambda x: np.min(x, (0, 2), keepdims=True)),
    "var": (lambda t: dg.var(t, (0, 2)), lambda x: np.var(x, (0, 2), ddof=1)),
    "var-population": (lambda t: t.var(1, True, correction=0),
                       lambda x: np.var(x, 1, keepdims=True)),
    "std": (lambda t: dg.std(t, -1), lambda x: np.std(x, -1, ddof=1)),
    "std-all": (lambda t: dg.std(t), lambda x: np.std(x, ddof=1)),
    "logsumexp": (lambda t: dg.logsumexp(t, 1), lambda x: np_lse(x, 1)),
    "logsumexp-all": (lambda t: dg.logsumexp(t), lambda x: np_lse(x)),
    "norm": (lambda t: dg.norm(t), lambda x: np.linalg.norm(x.reshape(-1))),
    "norm-dim": (lambda t: dg.norm(t, 2, 1), lambda x: np.linalg.norm(x, 2, 1)),
    "norm-1": (lambda t: dg.norm(t, 1, 0), lambda x: np.abs(x).sum(0)),
    "norm-3": (lambda t: t.norm(3, (0, 1)), lambda x: (np.abs(x) ** 3).sum((0, 1)) ** (1 / 3)),
    "norm-inf": (lambda t: dg.norm(t, math.inf, 2), lambda x: np.abs(x).max(2)),
    "norm-minus-inf": (lambda t: dg.norm(t, -math.inf, 2), lambda x: np.abs(x).min(2)),
    "norm-0": (lambda t: dg.norm(t, 0, 1), lambda x: (x != 0).sum(1)),
    "cumsum": (lambda t: dg.cumsum(t, 1), lambda x: np.cumsum(x, 1)),
    "cumsum-last": (lambda t: t.cumsum(-1), lambda x: np.cumsum(x, -1)),
    "cumsum-first": (lambda t: dg.cumsum(t, 0), lambda x: np.cumsum(x, 0)),
    "cumprod": (lambda t: dg.cumprod(t * 0.5, 1), lambda x: np.cumprod(x * 0.5, 1)),
    "cumprod-first": (lambda t: (t * 0.5).cumprod(0), lambda x: np.cumprod(x * 0.5, 0)),
    "prod": (lambda t: dg.prod(t * 0.3, 1), lambda x: np.prod(x * 0.3, 1)),
    "prod-all": (lambda t: (t * 0.5).prod(), lambda x: np.prod(x * 0.5)),
    "prod-keep": (lambda t: dg.prod(t, dim=(0, 2), keepdim=True),
                  lambda x: np.prod(x, (0, 2), keepdims=True)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy(device, name):
    ours, ref = CASES[name]
    out = ours(dg.ag_tensor(X))
    np.testing.assert_allclose(out.numpy(), ref(X), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_by_finite_differences(name):
    ours, _ = CASES[name]
    x = X.copy()
    if "min" in name or "inf" in name:      # away from ties: a min or max is not smooth there
        x = np.arange(x.size, dtype=np.float64).reshape(x.shape) * 0.37 % 5.0 - 2.2
    dg.gradcheck(ours, [x])


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_gradient_on_gpu_matches_cpu(gpu, name):
    ours, _ = CASES[name]
    grads = []
    for dev in ("cpu", "gpu"):
        dg.ag_device(dev)
        with dg.with_grad_tape():
            t = dg.ag_tensor(X, requires_grad=True)
            dg.sum(ours(t)).backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


def test_min_shares_ties_and_keeps_negative_zero(device):
    with dg.with_grad_tape():
        t = dg.ag_tensor([2.0, -1.0, -1.0, 0.5], requires_grad=True)
        dg.min(t).backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 0.5, 0.5, 0.0])
    z = dg.min(dg.ag_tensor([0.0, -0.0])).item()
    assert z == 0.0 and math.copysign(1.0, z) == -1.0
    assert math.isnan(dg.min(dg.ag_tensor([1.0, float("nan")])).item())


@pytest.mark.parametrize("x, want", [
    ([2.0, 3.0, 0.5, -4.0], [-6.0, -4.0, -24.0, 3.0]),        # no zero: g * prod / x
    ([2.0, 0.0, 3.0, -1.0], [0.0, -6.0, 0.0, 0.0]),           # one: the others' product
    ([2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]),             # two: nothing
])
def test_prod_gradient_with_zeros_is_pytorchs(device, x, want):
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        dg.prod(t).backward()
    np.testing.assert_array_equal(t.grad.numpy(), want)


def test_prod_of_rows_with_and_without_zeros_and_of_nothing(device):
    x = np.array([[1.5, 0.0, 2.0], [-1.0, 4.0, 0.5], [0.0, 3.0, 0.0]], np.float32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        dg.sum(dg.prod(t, 1) * dg.ag_tensor([1.0, 2.0, 3.0])).backward()
    np.testing.assert_array_equal(t.grad.numpy(), [[0.0, 3.0, 0.0], [4.0, -1.0, -8.0],
                                                   [0.0, 0.0, 0.0]])
    assert dg.prod(dg.ag_tensor(np.zeros((2, 0)))).item() == 1.0
    np.testing.assert_array_equal(dg.prod(dg.ag_tensor(np.zeros((2, 0))), 1).numpy(), [1, 1])
    assert math.isnan(dg.prod(dg.ag_tensor([np.inf, 0.0])).item())


def test_logsumexp_without_overflow(device):
    x = dg.ag_tensor([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 0.0]])
    np.testing.assert_allclose(dg.logsumexp(x, 1).numpy(), [1000.0 + math.log(2), -np.inf,
                                                             np.inf])


def test_two_norm_gradient_is_zero_at_zero(device):
    with dg.with_grad_tape():
        t = dg.ag_tensor(np.zeros((2, 3)), requires_grad=True)
        dg.sum(dg.norm(t, 2, 1)).backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.zeros((2, 3)))


@pytest.mark.parametrize("x, p", [([0.0, 0.0, 0.0], 3.0), ([0.0, 1.0, 2.0], 0.5),
                                  ([0.0, 1.0, -2.0], 3.0), ([3e-39, 4e-39], 2.0)],
                         ids=["zero vector p=3", "a zero p=0.5", "a zero p=3", "underflow"])
def test_norm_gradients_are_zero_where_pytorch_masks_them(device, x, p):
    """g sign(x) (|x| / norm)**(p - 1), 0 where x is 0 or the norm is 0 (the squares of
    3e-39 underflow: PyTorch's norm and gradient are 0 there), not 0 * inf."""
    x = np.array(x, np.float32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        y = dg.norm(t, p)
        y.backward()
    a = np.abs(x.astype(np.float64))
    norm = float(y.item())
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where((a == 0) | (norm == 0), 0.0,
                            np.sign(x) * (a / norm) ** (p - 1))
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-5)


def test_std_gradient_is_zero_where_there_is_no_spread(device):
    """PyTorch's rule: g / (2 std) masked to 0 where std is 0 (not 0 times inf), the rows
    with a spread unchanged."""
    x = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], np.float32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        dg.sum(dg.std(t, 1)).backward()
    spread = x[1] - x[1].mean()
    expected = np.stack([np.zeros(3), spread / (2 * np.sqrt((spread ** 2).sum() / 2))])
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_variance_of_a_large_mean_cancels_nothing(device, axis):
    """Elements about 1e4 with a spread of 1e-2 (float32's spacing there is 1e-3): the
    variance of the values as stored, to float32's precision, on either backend."""
    x = (1e4 + 1e-2 * np.random.default_rng(8).standard_normal((300, 70))).astype(np.float32)
    wide = x.astype(np.float64)
    v, m = dg.var_mean(dg.ag_tensor(x), axis, correction=0)
    np.testing.assert_allclose(v.numpy(), wide.var(axis), rtol=1e-5)
    np.testing.assert_allclose(m.numpy(), wide.mean(axis), rtol=1e-6)   # (a float32 sum)
    s, m2 = dg.std_mean(dg.ag_tensor(x), dim=axis, keepdim=True)
    np.testing.assert_allclose(s.numpy(), wide.std(axis, ddof=1, keepdims=True), rtol=1e-5)
    assert m2.shape == s.shape == wide.mean(axis, keepdims=True).shape


@pytest.mark.parametrize("shape, axis", [((40000, 3), 0), ((3, 40000), 1), ((70000, 2), 1),
                                         ((2, 2_100_004), 1)])
def test_variance_of_long_runs_and_of_many_outputs(device, shape, axis):
    """Tall columns (few outputs, long strided runs: cut into workgroup items that finish in
    the dispatch), long rows, more outputs than the gpu's counters, and rows cut into
    items whose threads each walk a share about one of its elements (reduce.comp)."""
    x = (5 + np.random.default_rng(9).standard_normal(shape)).astype(np.float32)
    np.testing.assert_allclose(dg.var(dg.ag_tensor(x), axis).numpy(),
                               x.astype(np.float64).var(axis, ddof=1), rtol=2e-6)


def test_unbiased_is_taken_as_pytorchs_older_spelling_of_correction(device):
    x = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 9.0]], np.float32)
    t = dg.ag_tensor(x)
    for unbiased, ddof in ((True, 1), (False, 0)):
        np.testing.assert_allclose(dg.var(t, 1, unbiased=unbiased).numpy(), x.var(1, ddof=ddof),
                                   rtol=1e-6)
        np.testing.assert_allclose(t.std(unbiased=unbiased).numpy(), x.std(ddof=ddof),
                                   rtol=1e-6)
        np.testing.assert_allclose(dg.var_mean(t, unbiased=unbiased)[0].numpy(),
                                   x.var(ddof=ddof), rtol=1e-6)
    with pytest.raises(dg.InvalidValueError, match=r"^std: give 'correction' or 'unbiased'"):
        dg.std(t, correction=0, unbiased=True)
    with pytest.raises(dg.ArgumentTypeError, match=r"^var: argument 'unbiased'"):
        dg.var(t, unbiased=1)


def test_variance_of_one_element_is_nan(device):
    assert math.isnan(dg.var(dg.ag_tensor([3.0])).item())
    assert dg.var(dg.ag_tensor([3.0]), correction=0).item() == 0.0


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: dg.var(t, correction=-1), dg.InvalidValueError, r"^var: argument 'correction'"),
    (lambda t: dg.min(t, 3), dg.AxisOutOfRange, r"^min: argument 'dim' is 3"),
    (lambda t: dg.amin(t, 3), dg.InvalidValueError, r"^min: argument 'axis'"),
    (lambda t: dg.min(t[:, :0]), dg.ShapeError, r"^min: argument 'x'"),
    (lambda t: dg.norm(t, "fro"), dg.ArgumentTypeError, r"^norm: argument 'p'"),
    (lambda t: dg.norm(t, -2), dg.InvalidValueError, r"^norm: argument 'p'"),
    (lambda t: dg.logsumexp(t, (0, 0)), dg.InvalidValueError, r"^logsumexp: argument 'axis'"),
    (lambda t: dg.cumsum(t, 3), dg.InvalidValueError, r"^cumsum: argument 'dim'"),
    (lambda t: dg.prod(t, 3), dg.InvalidValueError, r"^prod: argument 'axis'"),
    (lambda t: dg.prod(t, keepdim=1), dg.ArgumentTypeError, r"^prod: argument 'keepdims'"),
    (lambda t: dg.cumsum(t, None), dg.ArgumentTypeError, r"^cumsum: argument 'dim'"),
])
def test_bad_arguments_are_named(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(dg.ag_tensor(X))


def test_cumsum_of_long_lines_and_a_0d_tensor(device):
    # many tiles of the device's scan a line (538 tiles of 2048 elements)
    x = np.random.default_rng(5).standard_normal((2, 1_100_000)).astype(np.float32)
    got = dg.cumsum(dg.ag_tensor(x), 1).numpy()
    want = np.cumsum(x.astype(np.float64), 1)
    bound = 1e-6 * np.cumsum(np.abs(x.astype(np.float64)), 1)
    assert np.all(np.abs(got - want) <= bound)
    assert dg.cumsum(dg.ag_tensor(np.float32(2.5)), 0).item() == 2.5
    assert dg.cumsum(dg.ag_tensor(np.float32(2.5)), -1).shape == ()


@pytest.mark.parametrize("n", [4097, 2048 * 9 + 1, 2048 * 12])
def test_cumsum_of_lines_of_a_few_tiles(device, n):
    # the device sums tiles of 2048 four to a workgroup: 3, 10 and 12 tiles leave the
    # last group short, or not; the gradient sums from the end
    x, w = np.random.default_rng(n).standard_normal((2, 3, n)).astype(np.float32)
    t = dg.ag_tensor(x, requires_grad=True)
    with dg.with_grad_tape():
        y = dg.cumsum(t, -1)
        dg.sum(y * dg.ag_tensor(w)).backward()
    for got, v in ((y.numpy(), x), (t.grad.numpy()[:, ::-1], w[:, ::-1])):
        want = np.cumsum(v.astype(np.float64), 1)
        assert np.all(np.abs(got - want) <= 1e-6 * np.cumsum(np.abs(v), 1))


@pytest.mark.gpu
def test_cumsum_of_more_lines_than_the_counters_take_at_once(gpu, monkeypatch):
    # A line of several tiles takes a workspace counter in its dispatch; with more lines
    # than counters, the lines go in blocks, each from its own offset.
    from dualgrad.gpu.kernels import scan
    monkeypatch.setattr(scan, "COUNTERS", 2)
    x, w = np.random.default_rng(6).standard_normal((2, 5, 9000)).astype(np.float32)
    t = dg.ag_tensor(x, requires_grad=True)
    with dg.with_grad_tape():
        y = dg.cumsum(t, 1)
        dg.sum(y * dg.ag_tensor(w)).backward()      # the gradient: sums from the end
    for got, v in ((y.numpy(), x), (t.grad.numpy()[:, ::-1], w[:, ::-1])):
        want = np.cumsum(v.astype(np.float64), 1)
        assert np.all(np.abs(got - want) <= 1e-6 * np.cumsum(np.abs(v), 1))


@pytest.mark.parametrize("shape, dim", [
    ((3, 50), 1), ((2, 3000), 1), ((2, 4096 * 3 + 5), 1), ((1, 2048 * 2049 + 7), 1),
    ((70, 9, 4), 1), ((5, 4), 0), ((), 0)])
def test_cumsum_of_int32_and_bools_is_exact_int32_wrapping(device, shape, dim):
    # short lines, one tile, several, many (2050 tiles of 2048: their prefix in two rounds),
    # strided ones; sums past int32's range wrap as int32 arithmetic does
    rng = np.random.default_rng(len(shape) + dim + sum(shape))
    a = rng.integers(-2 ** 31, 2 ** 31, shape).astype(np.int32)
    got = dg.cumsum(dg.tensor(a, dtype="int32"), dim)
    assert got.dtype == np.int32 and not got.requires_grad
    want = np.cumsum(a.astype(np.int64), dim).astype(np.int32) if a.ndim else a
    np.testing.assert_array_equal(got.numpy(), want)
    mask = rng.random(shape) < 0.5
    counts = dg.tensor(mask).cumsum(dim)                     # (a bool counts)
    assert counts.dtype == np.int32
    np.testing.assert_array_equal(counts.numpy(), np.cumsum(mask, dim) if a.ndim else mask)


def test_cumsum_takes_pytorchs_dtype_and_counts_positions(device):
    mask = dg.tensor([[True, True, False, True], [False, True, True, True]])
    np.testing.assert_array_equal((mask.cumsum(-1) - 1).numpy(), [[0, 1, 1, 2], [-1, 0, 1, 2]])
    i = dg.tensor([3, -1, 2 ** 24 + 1])
    y = dg.cumsum(i, 0, dtype=dg.float32)                    # converted first, as PyTorch's
    assert y.dtype == np.float32 and y.numpy().tolist() == [3.0, 2.0, 2.0 ** 24 + 2]
    x = dg.ag_tensor([1.0, 2.0, 4.0], requires_grad=True)
    with dg.with_grad_tape():
        z = x.cumsum(0, dtype="int32")                          # (no gradient through int32)
    assert z.dtype == np.int32 and z.numpy().tolist() == [1, 3, 7] and not z.requires_grad
    with pytest.raises(dg.InvalidValueError, match=r"^cumsum: argument 'dim'"):
        dg.cumsum(mask, 2)


@pytest.mark.gpu
def test_a_captured_step_with_an_int32_cumsum_replays_as_eager_steps(gpu):
    # (the running counts, each batch's own, weight the loss the replays must give again)
    assert_layer_step_replays(lambda h: dg.sum(h * (h > 0).cumsum(dim=1).float()), 6, seed=7)


@pytest.mark.parametrize("n", [50, 3000, 2048 * 5 + 3, 2048 * 2049 + 7])
def test_cumprod_of_long_lines_within_gamma_n_and_int32_exact(device, n):
    # short lines, one tile, several, and a prefix of the tiles' products in two rounds
    rng = np.random.default_rng(n)
    x = (1 + rng.uniform(-2 ** -9, 2 ** -9, (2, n))).astype(np.float32)
    x[0, n // 2] = -1.0
    got = dg.cumprod(dg.ag_tensor(x), 1).numpy()
    want = np.cumprod(x.astype(np.float64), 1)
    assert np.all(np.abs(got - want) <= 1e-7 * n * np.abs(want) + 1e-7 * np.abs(want))
    ints = rng.integers(-3, 4, (2, min(n, 5000))).astype(np.int32)
    got = dg.cumprod(dg.tensor(ints), 1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.numpy(), np.cumprod(ints.astype(np.int64), 1)
                                  .astype(np.int32))                        # (wraps)


def test_cumprod_gradient_through_zeros_as_pytorchs(device):
    # d/dx_i of sum_j g_j y_j: before a line's first zero, (sums of g y from the end) / x;
    # at it, the sums of g times the products without it; past it, 0
    a = np.array([[2.0, 3.0, 0.0, 4.0, 0.0, 5.0], [0.0, 2.0, 3.0, 1.0, 1.0, 1.0],
                  [1.5, -2.0, 3.0, 0.5, 2.0, -1.0]], np.float32)
    g = np.arange(1.0, 7.0, dtype=np.float32)
    x = dg.ag_tensor(a, requires_grad=True)
    with dg.with_grad_tape():
        dg.sum(dg.cumprod(x, 1) * dg.ag_tensor(g)).backward()
    want = np.zeros_like(a, dtype=np.float64)
    for r, row in enumerate(a.astype(np.float64)):
        for i in range(6):
            want[r, i] = sum(g[j] * np.prod(np.delete(row[:j + 1], i)) for j in range(i, 6))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)
    assert dg.gradcheck(lambda v: dg.cumprod(v, 0), np.array([1.5, 0.0, -2.0, 0.0, 3.0]))
    assert dg.gradcheck(lambda v: dg.cumprod(v, 1), np.random.default_rng(1).standard_normal(
        (3, 7)))


# -- max and min along one dim: (values, indices), as torch.max(input, dim) -----------------

def test_max_along_a_dim_gives_values_and_indices_as_pytorch(device):
    a = np.array([[1.0, 5.0, 5.0, -2.0], [np.nan, 0.0, 3.0, np.nan], [2.0, 2.0, 1.0, 0.0]],
                 np.float32)
    t = dg.ag_tensor(a, requires_grad=True)
    with dg.with_grad_tape():
        values, indices = t.max(1)                    # the first maximum; a NaN counts as one
        dg.sum(values * dg.ag_tensor([1.0, 2.0, 3.0])).backward()
    np.testing.assert_array_equal(values.numpy(), [5.0, np.nan, 2.0])
    np.testing.assert_array_equal(indices.numpy(), [1, 0, 0])
    assert indices.dtype == np.int32
    # the gradient goes to the element the index names (torch.max's), not shared at ties
    np.testing.assert_array_equal(t.grad.numpy(), [[0, 1, 0, 0], [2, 0, 0, 0], [3, 0, 0, 0]])
    low = dg.min(t, dim=-2, keepdim=True)
    assert type(low).__name__ == "min" and low.values.shape == (1, 4)
    np.testing.assert_array_equal(low.indices.numpy(), [[1, 1, 2, 1]])
    np.testing.assert_array_equal(low.values.numpy(), [[np.nan, 0.0, 1.0, np.nan]])


def test_max_without_dim_or_along_axis_gives_the_values_alone(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dg.ag_tensor(a)
    assert dg.max(t).item() == 11.0 and t.min().item() == 0.0
    np.testing.assert_array_equal(np.max(t, axis=1).numpy(), [3, 7, 11])   # NumPy's spelling
    np.testing.assert_array_equal(dg.max(t, axis=0).numpy(), a[2])
    np.testing.assert_array_equal(dg.min(t, (0, 1)).numpy(), 0.0)           # a tuple: amin
    np.testing.assert_array_equal(dg.amax(t, 1).numpy(), [3, 7, 11])
    np.testing.assert_array_equal(dg.max(t, dg.full((3, 4), 5.0)).numpy(), np.maximum(a, 5))
    np.testing.assert_array_equal(dg.min(t, dg.full((3, 4), 5.0)).numpy(), np.minimum(a, 5))


def test_max_along_a_dim_of_integers_bools_and_scalars(device):
    v, i = dg.max(dg.tensor([[3, -7, 3], [0, 9, 9]]), 1)
    assert v.dtype == np.int32
    np.testing.assert_array_equal(v.numpy(), [3, 9])
    np.testing.assert_array_equal(i.numpy(), [0, 1])
    v, i = dg.tensor([False, True, True]).max(0)
    assert v.dtype == np.bool_ and v.item() is True and i.item() == 1
    v, i = dg.max(dg.tensor(2.5), 0)                 # a 0-d tensor: itself, index 0
    assert v.item() == 2.5 and i.item() == 0 and v.shape == i.shape == ()


@pytest.mark.parametrize("call, error, pattern", [
    (lambda t: dg.max(t, 2), dg.AxisOutOfRange, r"^max: argument 'dim' is 2"),
    (lambda t: dg.max(t, 1.5), dg.ArgumentTypeError, r"^max: argument 'dim' has type float"),
    (lambda t: dg.max(t, 1, "no"), dg.ArgumentTypeError, r"^max: argument 'keepdim'"),
    (lambda t: dg.max(t, 1, axis=1), dg.ArgumentTypeError, r"^max: got both 'axis' and"),
    (lambda t: dg.min(t[:, :0], 1), dg.ShapeError, r"^min: argument 'input' has shape \(3, 0\)"),
])
def test_max_along_a_dim_names_bad_arguments(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(dg.ag_tensor(np.ones((3, 4), np.float32)))
