"""Layers (dg.nn) against NumPy definitions, module plumbing (parameters, modes, state
dicts, seeding) and the Philox counter-based generator behind dropout masks.
"""
import math

import numpy as np
import pytest

import dualgrad as dg
from dualgrad.cpu import dropout as cpu_dropout

F32_EPS = float(np.finfo(np.float32).eps)
# A float32 result of one elementwise function computed in higher precision and rounded
# once is within half an ULP of the true value; allow two ULP (the GPU's transcendental
# functions are not correctly rounded).
ELEMENTWISE_RTOL = 2 * F32_EPS


def f64(t):
    return np.asarray(t.numpy() if isinstance(t, dg.Tensor) else t, np.float64)


def assert_dot_close(actual, exact, abs_terms, k):
    """A float32 dot product of length k (any summation order) is within
    k * eps * sum |terms| of the exact value (the classic bound, with a factor 2 slack)."""
    np.testing.assert_array_less(np.abs(f64(actual) - exact),
                                 2 * k * F32_EPS * abs_terms + 1e-30)


# ---------------------------------------------------------------------------------------------
# Linear

def test_linear_shapes_and_init_bounds(device):
    lin = dg.nn.Linear(50, 30)
    assert lin.weight.shape == (30, 50) and lin.bias.shape == (30,)
    assert lin.weight.dtype == np.float32
    bound = 1 / math.sqrt(50)
    for p in (lin.weight, lin.bias):
        v = f64(p)
        assert np.all(np.abs(v) <= bound * (1 + F32_EPS))
    w = f64(lin.weight)
    # U(-b, b): the extremes come close to the bound, mean 0, variance b^2 / 3
    assert np.abs(w).max() > 0.98 * bound
    assert abs(w.mean()) < 0.05 * bound
    assert w.var() == pytest.approx(bound ** 2 / 3, rel=0.1)
    no_bias = dg.nn.Linear(3, 2, bias=False)
    assert no_bias.bias is None
    assert [n for n, _ in no_bias.named_parameters()] == ["weight"]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(6, 20), (2, 5, 20)])
def test_linear_forward_matches_numpy(device, rng, bias, shape):
    lin = dg.nn.Linear(20, 7, bias=bias)
    x = rng.standard_normal(shape).astype(np.float32)
    y = lin(dg.ag_tensor(x))
    assert y.shape == shape[:-1] + (7,)
    w = f64(lin.weight)
    b = f64(lin.bias) if bias else np.zeros(7)
    exact = x.astype(np.float64) @ w.T + b
    assert_dot_close(y, exact, np.abs(x) @ np.abs(w).T + np.abs(b), 21)


# ---------------------------------------------------------------------------------------------
# Sequential

def test_sequential_order_indexing_len(device, rng):
    a, b = dg.nn.Linear(4, 6), dg.nn.Linear(6, 3)
    relu = dg.nn.ReLU()
    seq = dg.nn.Sequential(a, relu, b)
    assert len(seq) == 3
    assert seq[0] is a and seq[1] is relu and seq[2] is b and seq[-1] is b
    assert list(seq) == [a, relu, b]
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight",
                                                      "2.bias"]
    assert seq.parameters() == [a.weight, a.bias, b.weight, b.bias]
    x = rng.standard_normal((5, 4)).astype(np.float32)
    out = seq(dg.ag_tensor(x)).numpy()
    by_hand = b(relu(a(dg.ag_tensor(x)))).numpy()
    np.testing.assert_array_equal(out, by_hand)
    # applied in order: the other order does not even fit (6 outputs into 4 inputs)
    with pytest.raises(dg.ShapeError):
        dg.nn.Sequential(b, relu, a)(dg.ag_tensor(x))


def test_sequential_shared_module_parameters_once(device):
    shared = dg.nn.Linear(4, 4)
    seq = dg.nn.Sequential(shared, dg.nn.Tanh(), shared, dg.nn.Linear(4, 2))
    params = seq.parameters()
    assert len(params) == 4
    assert len({id(p) for p in params}) == 4
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "3.weight",
                                                      "3.bias"]
    # the state and the walks as PyTorch's: the shared module's state under both of its
    # names, the module itself once among the modules and children, fn applied to it once
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias", "3.weight",
                                      "3.bias"]
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1", "3"]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "3"]
    assert list(seq.modules()) == [seq, shared, seq[1], seq[3]]
    calls = []
    seq.apply(lambda m: calls.append(type(m).__name__))
    assert calls == ["Linear", "Tanh", "Linear", "Sequential"]
    # an optimizer over them accepts them (it rejects duplicates)
    dg.optim.SGD(params, lr=0.1)


def test_tied_weights_are_in_the_state_under_both_names_and_load_from_it(device):
    class Tied(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = dg.nn.Embedding(5, 4)
            self.head = dg.nn.Linear(4, 5, bias=False)
            self.head.weight = self.emb.weight
    model = Tied()
    state = model.state_dict()
    assert list(state) == ["emb.weight", "head.weight"]
    assert len(model.parameters()) == 1
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    model.load_state_dict({"emb.weight": table, "head.weight": table})
    np.testing.assert_array_equal(model.head.weight.numpy(), table)
    assert model.emb.weight is model.head.weight


def test_module_tree_helpers_follow_pytorch(device):
    seq = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.ReLU())
    seq.add_module("head", dg.nn.Linear(4, 2))
    seq.append(dg.nn.Tanh())
    assert [n for n, _ in seq.named_children()] == ["0", "1", "head", "3"]
    tail = seq[1:3]
    assert isinstance(tail, dg.nn.Sequential) and list(tail) == [seq[1], seq[2]]
    assert seq.get_submodule("head") is seq[2] and seq.get_submodule("") is seq
    with pytest.raises(dg.InvalidValueError, match="no child 'nope'"):
        seq.get_submodule("head.nope")
    extra = dg.ag_param(np.ones(2, np.float32))
    seq.register_parameter("scale", extra)
    assert seq.parameters()[0] is extra        # (its own parameters first, as PyTorch)
    assert seq.requires_grad_(False) is seq
    assert not any(p.requires_grad for p in seq.parameters())
    with pytest.raises(dg.ArgumentTypeError, match="add_module: argument 'module'"):
        seq.add_module("x", np.ones(2))
    with pytest.raises(dg.ArgumentTypeError, match="register_parameter: argument 'param'"):
        seq.register_parameter("y", np.ones(2))


def test_sequential_rejects_non_module():
    with pytest.raises(dg.ArgumentTypeError):
        dg.nn.Sequential(dg.nn.ReLU(), lambda x: x)


def test_a_linear_and_its_relu_run_as_one_op_with_the_same_bits(device, rng, monkeypatch):
    # Sequential runs Linear + ReLU as linear(..., activation="relu"): the relu is made as
    # the product is stored, its rule from the output; values and gradients keep their
    # bits (relu only selects). Without a bias too; a Linear subclass is left alone.
    relus = []
    real_relu = dg.api.ops.relu
    monkeypatch.setattr(dg.api.ops, "relu", lambda x: (relus.append(1), real_relu(x))[1])
    x = rng.standard_normal((32, 5)).astype(np.float32)
    for bias in (True, False):
        dg.manual_seed(1)
        model = dg.nn.Sequential(dg.nn.Linear(5, 7, bias=bias), dg.nn.ReLU(),
                                 dg.nn.Linear(7, 3), dg.nn.ReLU())

        def run(forward):
            with dg.with_grad_tape():
                y = forward(dg.ag_tensor(x))
                dg.sum(y * y).backward()
            grads = [p.grad.numpy() for p in model.parameters()]
            for p in model.parameters():
                p.grad = None
            return [y.numpy()] + grads
        relus.clear()
        fused = run(model)
        assert relus == []
        apart = run(lambda t: real_relu(model[2](real_relu(model[0](t)))))
        hidden = x @ model[0].weight.numpy().T        # (the relus decided: some below 0)
        assert fused[0].min() == 0.0 and (hidden < 0).any() and (hidden > 0).any()
        for f, a in zip(fused, apart):
            np.testing.assert_array_equal(f, a)

    class Scaled(dg.nn.Linear):
        def forward(self, t):
            return super().forward(t) * 2.0
    dg.manual_seed(1)
    model = dg.nn.Sequential(Scaled(5, 7), dg.nn.ReLU())
    relus.clear()
    y = model(dg.ag_tensor(x))
    assert relus == [1]
    want = np.maximum(2.0 * (x @ model[0].weight.numpy().T + model[0].bias.numpy()), 0)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("above", ["a linear", "two linears", "a linear and a product",
                                   "a product"])
def test_a_gradient_is_taken_through_a_fused_relu_once_where_it_is_made(device, rng,
                                                                         monkeypatch, above):
    # Below a linear layer, the gradient through a fused relu is masked as the layer's
    # product is stored; the tape then makes no pass of relu's backward of its own, unless
    # a gradient that did not come masked meets it there. The bits are those of a relu op.
    be = dg.api.device.active()
    calls = []
    real = be.unary_backward
    monkeypatch.setattr(be, "unary_backward",
                        lambda op, *a: (calls.append(op), real(op, *a))[1])
    x = rng.standard_normal((16, 5)).astype(np.float32)
    w1, w2, w3 = (dg.ag_param(rng.standard_normal(s).astype(np.float32))
                  for s in ((7, 5), (3, 7), (4, 7)))
    b1 = dg.ag_param(rng.standard_normal(7).astype(np.float32))
    c = rng.standard_normal((16, 7)).astype(np.float32)

    def loss(h):
        terms = {"a linear": [dg.linear(h, w2)], "two linears": [dg.linear(h, w2),
                                                                 dg.linear(h, w3)],
                 "a linear and a product": [dg.linear(h, w2), h * c], "a product": [h * c]}
        return sum(dg.sum(t * t) for t in terms[above])

    def grads(fused):
        with dg.with_grad_tape():
            h = (dg.linear(x, w1, b1, activation="relu") if fused
                 else dg.relu(dg.linear(x, w1, b1)))
            loss(h).backward()
        out = [p.grad.numpy() for p in (w1, b1, w2, w3) if p.grad is not None]
        for p in (w1, b1, w2, w3):
            p.grad = None
        return out
    apart = grads(fused=False)
    calls.clear()
    fused = grads(fused=True)
    assert calls.count("relu") == (1 if "product" in above else 0)
    assert len(fused) == len(apart)
    for f, a in zip(fused, apart):
        np.testing.assert_array_equal(f, a)
    assert (apart[1] != 0).any() and (x @ w1.numpy().T + b1.numpy() < 0).any()


def test_linear_names_a_bad_activation_and_changes_nothing(device):
    layer = dg.nn.Linear(3, 2)
    for bad in ("gelu", 1, "RELU"):
        with pytest.raises(dg.InvalidValueError, match="'activation'"):
            dg.linear(np.ones((4, 3), np.float32), layer.weight, layer.bias, activation=bad)


# ---------------------------------------------------------------------------------------------
# Activations and LayerNorm

ACTIVATION_ULPS = 4
_erf = np.vectorize(math.erf)
ACTIVATIONS = {
    "ReLU": lambda x: np.maximum(x, 0.0),
    "GELU": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "Tanh": np.tanh,
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "SELU": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
    "Hardsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "Hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "Softsign": lambda x: x / (1 + np.abs(x)),
    "LogSigmoid": lambda x: -np.logaddexp(0, -x),
    "Mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_modules_match_numpy(device, rng, name):
    x = (3 * rng.standard_normal((7, 9))).astype(np.float32)
    x[0, :5] = [0.0, -0.0, 20.0, -20.0, 1e-3]
    y = getattr(dg.nn, name)()(dg.ag_tensor(x))
    assert y.shape == x.shape
    expected = ACTIVATIONS[name](x.astype(np.float64))
    # a few ULP of the result, plus a few ULP of |x| absolute: a float32 GELU = x * Phi(x)
    # loses relative accuracy where 1 + erf cancels (PyTorch's float32 kernels do too)
    bound = ACTIVATION_ULPS * F32_EPS * (np.abs(expected) + np.abs(x))
    np.testing.assert_array_less(np.abs(f64(y) - expected), bound + 1e-38)


def ref_layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)      # biased, as PyTorch
    return (x - mu) / np.sqrt(var + eps) * w + b


@pytest.mark.parametrize("eps", [1e-5, 0.5])
def test_layer_norm_matches_numpy(device, rng, eps):
    ln = dg.nn.LayerNorm(16, eps=eps)
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones(16, np.float32))
    np.testing.assert_array_equal(ln.bias.numpy(), np.zeros(16, np.float32))
    w = rng.standard_normal(16).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    ln.load_state_dict({"weight": w, "bias": b})
    # rows with an offset and a small spread, so a non-centred variance would show
    x = (rng.standard_normal((3, 5, 16)) * 0.3 + 4.0).astype(np.float32)
    y = ln(dg.ag_tensor(x))
    expected = ref_layer_norm(x.astype(np.float64), w, b, eps)
    # normalising is well conditioned; the float32 input is exact in the reference, so the
    # error is a few roundings of values of order |w| * |x_hat| + |b|
    scale = np.broadcast_to(np.abs(w) * 4 + np.abs(b), x.shape)
    np.testing.assert_array_less(np.abs(f64(y) - expected), 8 * F32_EPS * scale)


# ---------------------------------------------------------------------------------------------
# Embedding

def test_embedding_lookup(device, rng):
    emb = dg.nn.Embedding(10, 4)
    assert emb.weight.shape == (10, 4)
    table = emb.weight.numpy()
    idx = np.array([[3, 0, 9], [3, 3, 1]], np.int64)
    out = emb(idx)
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out.numpy(), table[idx])
    for bad in ([0, 10], [-1, 2]):
        with pytest.raises(dg.InvalidValueError):
            emb(np.array(bad, np.int64))
    with pytest.raises(dg.ArgumentTypeError):
        emb(np.array([0.0, 1.0]))


def test_embedding_init_standard_normal(device):
    w = f64(dg.nn.Embedding(1000, 20).weight)
    assert abs(w.mean()) < 0.02 and w.std() == pytest.approx(1.0, abs=0.02)


# ---------------------------------------------------------------------------------------------
# Dropout

N_DROP = 100_000
# the fraction of zeros is a binomial proportion: sd sqrt(p (1-p) / n) <= 0.0016 here
FRACTION_TOL = 0.01


def scaled(x, p):
    """The survivors' values: x * (1/(1-p)) with the scale rounded to float32 once."""
    return (x.astype(np.float64) * np.float64(np.float32(1.0 / (1.0 - p))))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_train_statistics_and_scale(device, rng, p):
    drop = dg.nn.Dropout(p)
    x = (rng.random(N_DROP) + 0.5).astype(np.float32)       # no zeros of its own
    y = f64(drop(dg.ag_tensor(x)))
    kept = y != 0
    assert abs((1 - kept.mean()) - p) < FRACTION_TOL
    np.testing.assert_allclose(y[kept], scaled(x, p)[kept], rtol=ELEMENTWISE_RTOL)


def test_dropout_new_mask_each_call(device, rng):
    drop = dg.nn.Dropout(0.5)
    x = dg.ag_tensor(np.ones(N_DROP))
    m1, m2 = f64(drop(x)) != 0, f64(drop(x)) != 0
    assert drop.step == 2
    # independent masks agree on about half the elements, not all
    assert abs((m1 == m2).mean() - 0.5) < FRACTION_TOL


def test_dropout_same_seed_and_step_same_mask(device, rng):
    x = rng.standard_normal((64, 33)).astype(np.float32)
    a = dg.dropout(dg.ag_tensor(x), 0.3, seed=2 ** 40 + 5, step=7).numpy()
    b = dg.dropout(dg.ag_tensor(x), 0.3, seed=2 ** 40 + 5, step=7).numpy()
    np.testing.assert_array_equal(a, b)
    c = dg.dropout(dg.ag_tensor(x), 0.3, seed=2 ** 40 + 5, step=8).numpy()
    d = dg.dropout(dg.ag_tensor(x), 0.3, seed=2 ** 40 + 6, step=7).numpy()
    assert np.any((a == 0) != (c == 0)) and np.any((a == 0) != (d == 0))
    # two modules given the same (seed, step) draw the same mask
    m1, m2 = dg.nn.Dropout(0.3), dg.nn.Dropout(0.3)
    assert m1.seed != m2.seed
    m2.load_extra_state({"": {"seed": m1.seed, "step": 0}})
    np.testing.assert_array_equal(m1(dg.ag_tensor(x)).numpy(), m2(dg.ag_tensor(x)).numpy())


def test_cpu_dropout_kernel_repeats_and_scales(rng):
    x = rng.standard_normal(4099).astype(np.float32)       # not a multiple of 4
    a = cpu_dropout.dropout(x, 0.25, 99, 3)
    np.testing.assert_array_equal(a, cpu_dropout.dropout(x, 0.25, 99, 3))
    assert a.dtype == np.float32 and a.shape == x.shape
    kept = a != 0
    np.testing.assert_array_equal(a[kept], (x * np.float32(1 / 0.75))[kept])
    assert np.any(kept != (cpu_dropout.dropout(x, 0.25, 99, 4) != 0))
    x64 = x.astype(np.float64)                             # float64 input: same mask
    np.testing.assert_array_equal(cpu_dropout.dropout(x64, 0.25, 99, 3) != 0, kept)


def test_dropout_backward_uses_the_same_mask(device, rng):
    x = dg.ag_param(rng.standard_normal((8, 50)))
    with dg.with_grad_tape():
        y = dg.dropout(x, 0.4, seed=11, step=2)
        dg.sum(y).backward()
    kept = y.numpy() != 0
    expected = np.where(kept, np.float32(1 / 0.6), np.float32(0))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=ELEMENTWISE_RTOL)


def test_dropout_eval_p0_p1(device, rng):
    x = (rng.random((40, 30)) + 0.5).astype(np.float32)
    drop = dg.nn.Dropout(0.5).eval()
    np.testing.assert_array_equal(drop(dg.ag_tensor(x)).numpy(), x)
    assert drop.step == 0                                  # eval draws no mask
    p0 = dg.nn.Dropout(0.0)
    assert p0.training
    np.testing.assert_array_equal(p0(dg.ag_tensor(x)).numpy(), x)
    p1 = dg.nn.Dropout(1.0)
    np.testing.assert_array_equal(p1(dg.ag_tensor(x)).numpy(), np.zeros_like(x))
    with pytest.raises(dg.InvalidValueError):
        dg.nn.Dropout(1.5)


# ---------------------------------------------------------------------------------------------
# Philox4x32-10: the published Random123 known-answer vectors, for the library's kernel and
# for the NumPy transcription used below to check the dropout masks bit for bit.

KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
M32 = np.uint64(0xFFFFFFFF)


def np_philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 over uint64 arrays holding 32-bit words (Salmon et al., SC'11)."""
    c = [np.asarray(v, np.uint64) for v in (c0, c1, c2, c3)]
    k0, k1 = np.asarray(k0, np.uint64), np.asarray(k1, np.uint64)
    for r in range(10):
        if r:                                              # bump the key between rounds
            k0 = (k0 + np.uint64(0x9E3779B9)) & M32
            k1 = (k1 + np.uint64(0xBB67AE85)) & M32
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & M32,
             (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & M32]
    return c


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox_known_answers(ctr, key, expected):
    u = np.uint64
    got = cpu_dropout.philox4x32(*(u(v) for v in ctr), *(u(v) for v in key))
    assert [int(v) for v in got] == list(expected)
    assert [int(v) for v in np_philox(*ctr, *key)] == list(expected)


@pytest.mark.parametrize("seed,step", [(0, 0), (2 ** 40 + 12345, 2 ** 33 + 7),
                                       (2 ** 64 - 1, 3)])
def test_dropout_mask_is_the_documented_philox_function(device, seed, step):
    # module docstring: counter (i//4 low, i//4 high, step low, step high), key (seed low,
    # seed high); element i keeps output word i%4's top 24 bits u; kept iff
    # u >= round(p * 2**24)
    p, n = 0.3, 4 * 1000 + 3
    block = np.arange((n + 3) // 4, dtype=np.uint64)
    words = np_philox(block & M32, block >> np.uint64(32),
                      np.uint64(step & 0xFFFFFFFF), np.uint64(step >> 32),
                      np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32))
    u = (np.stack(words, axis=1).reshape(-1)[:n] >> np.uint64(8)).astype(np.int64)
    expected_kept = u >= round(p * 2 ** 24)
    x = np.ones(n, np.float32)
    np.testing.assert_array_equal(cpu_dropout.dropout(x, p, seed, step) != 0, expected_kept)
    got = dg.dropout(dg.ag_tensor(x), p, seed, step).numpy()
    np.testing.assert_array_equal(got != 0, expected_kept)


# ---------------------------------------------------------------------------------------------
# Modes, state dicts, seeding

def make_model():
    return dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.LayerNorm(8),
                            dg.nn.Sequential(dg.nn.Dropout(0.2), dg.nn.GELU()),
                            dg.nn.Linear(8, 3))


def test_train_eval_propagate():
    model = make_model()
    modules = [m for _, m in model.named_modules()]
    assert len(modules) == 7
    assert all(m.training for m in modules)
    assert model.eval() is model
    assert not any(m.training for m in modules)
    assert model.train() is model
    assert all(m.training for m in modules)
    model[2].eval()                                  # a subtree only
    assert model.training and model[0].training
    assert not model[2].training and not model[2][0].training


def params_of(model):
    return {n: p.numpy() for n, p in model.named_parameters()}


def assert_params_equal(model, expected):
    got = params_of(model)
    assert list(got) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_state_dict_round_trip(device, rng):
    a, b = make_model(), make_model()
    state = a.state_dict()
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"]
    assert all(isinstance(v, np.ndarray) for v in state.values())
    state["0.weight"][...] = 7.0                     # a copy: the model is unaffected
    assert not np.any(a[0].weight.numpy() == 7.0)
    state = a.state_dict()
    b.load_state_dict(state)
    assert_params_equal(b, state)
    x = dg.ag_tensor(rng.standard_normal((5, 4)))
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def _bad_states(good):
    missing = dict(good)
    del missing["0.bias"]
    unexpected = dict(good, **{"4.weight": np.zeros((2, 2), np.float32)})
    wrong_shape = dict(good)
    wrong_shape["3.bias"] = np.zeros(4, np.float32)  # the last entry: the others would
    return {"missing": (missing, dg.InvalidValueError),  # have been written already
            "unexpected": (unexpected, dg.InvalidValueError),
            "wrong_shape": (wrong_shape, dg.ShapeError)}


@pytest.mark.parametrize("case", ["missing", "unexpected", "wrong_shape"])
def test_load_state_dict_strict_errors_change_nothing(device, case):
    target, source = make_model(), make_model()
    before = params_of(target)
    state, error = _bad_states(source.state_dict())[case]
    with pytest.raises(error) as info:
        target.load_state_dict(state)
    assert_params_equal(target, before)
    key = {"missing": "0.bias", "unexpected": "4.weight", "wrong_shape": "3.bias"}[case]
    assert key in str(info.value)


def test_load_state_dict_non_strict(device):
    target, source = make_model(), make_model()
    before = params_of(target)
    state = source.state_dict()
    del state["0.bias"]
    state["extra.weight"] = np.zeros(3, np.float32)
    target.load_state_dict(state, strict=False)
    after = params_of(target)
    np.testing.assert_array_equal(after["0.bias"], before["0.bias"])
    for name in state:
        if name in after:
            np.testing.assert_array_equal(after[name], state[name])
    # a wrong shape is an error even when not strict, and nothing changes
    state["3.bias"] = np.zeros(5, np.float32)
    with pytest.raises(dg.ShapeError):
        target.load_state_dict(state, strict=False)
    assert_params_equal(target, after)


def test_manual_seed_repeats_initialisation(device):
    dg.manual_seed(42)
    a = make_model()
    dg.manual_seed(42)
    b = make_model()
    assert_params_equal(b, params_of(a))
    assert a[2][0].seed == b[2][0].seed
    dg.manual_seed(43)
    c = make_model()
    assert not np.array_equal(params_of(c)["0.weight"], params_of(a)["0.weight"])
    assert c[2][0].seed != a[2][0].seed


def test_silu_and_softplus_layers_apply_their_ops(device, rng):
    # the layers of the ops, as PyTorch's nn.SiLU and nn.Softplus (by default beta 1 and
    # threshold 20: the kernel alone)
    x = np.array([-30.0, -2.0, -1e-3, 0.0, 0.5, 19.0, 21.0], np.float32)
    t = dg.ag_tensor(x)
    for layer, op in ((dg.nn.SiLU(), dg.silu), (dg.nn.Softplus(), dg.softplus)):
        assert isinstance(layer, dg.nn.Module) and type(layer).__name__ in repr(layer)
        np.testing.assert_array_equal(layer(t).numpy(), op(t).numpy())
    rtol = (8 + 2 * 30) * 2.0 ** -24     # the tolerance table's bound at |x| <= 30
    np.testing.assert_allclose(dg.nn.Softplus()(t).numpy(),
                               np.where(x > 20, x, np.logaddexp(0.0, x)), rtol=rtol)
    np.testing.assert_allclose(dg.nn.SiLU()(t).numpy(), x / (1 + np.exp(-x.astype(float))),
                               rtol=rtol, atol=1e-30)
    assert dg.nn.SiLU.__doc__ == dg.silu.__doc__ and "Softplus" in dg.softplus.__doc__


def test_hardtanh_and_relu6_layers_and_their_bounds(device):
    x = np.array([-7.0, -1.5, -0.5, 0.0, 0.5, 2.0, 6.0, 9.0], np.float32)
    with dg.no_grad():
        assert np.array_equal(dg.nn.Hardtanh()(x).numpy(), np.clip(x, -1, 1))
        assert np.array_equal(dg.nn.Hardtanh(-2.0, 3.0)(x).numpy(), np.clip(x, -2, 3))
        assert np.array_equal(dg.nn.ReLU6()(x).numpy(), np.clip(x, 0, 6))
    assert "min_val=-2.0, max_val=3.0" in repr(dg.nn.Hardtanh(-2.0, 3.0))
    for bad in ((1.0, 1.0), (2.0, -2.0)):
        with pytest.raises(dg.InvalidValueError, match="'min_val' .* must be less than"):
            dg.nn.Hardtanh(*bad)
    with pytest.raises(dg.InvalidValueError, match="hardtanh: argument 'max_val'"):
        dg.hardtanh(x, 0.0, float("inf"))
    # at the bounds no gradient flows (clamp's does)
    t = dg.ag_tensor(np.array([-1.0, 0.0, 1.0], np.float32), requires_grad=True)
    with dg.with_grad_tape():
        dg.sum(dg.hardtanh(t)).backward()
    assert np.array_equal(t.grad.numpy(), [0.0, 1.0, 0.0])


def test_softplus_with_beta_and_threshold(device):
    x = np.array([-3.0, 0.5, 2.4, 2.6, 10.0], np.float32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        y = dg.nn.Softplus(beta=2.0, threshold=5.0)(t)
        dg.sum(y).backward()
    z = 2.0 * x.astype(np.float64)
    linear = z > 5.0                       # (2.6 and 10: x itself, slope 1)
    np.testing.assert_allclose(y.numpy(), np.where(linear, x, np.log1p(np.exp(z)) / 2.0),
                               rtol=1e-6)
    np.testing.assert_allclose(t.grad.numpy(), np.where(linear, 1.0, 1 / (1 + np.exp(-z))),
                               rtol=1e-6)
    with pytest.raises(dg.InvalidValueError, match="Softplus: argument 'beta'"):
        dg.nn.Softplus(beta=0.0)


def test_layer_norm_over_trailing_axes_and_without_affine(device, rng):
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    flat = x.reshape(4, 6).astype(np.float64)
    normed = ((flat - flat.mean(1, keepdims=True)) /
              np.sqrt(flat.var(1, keepdims=True) + 1e-5)).reshape(4, 2, 3)
    plain = dg.nn.LayerNorm((2, 3), elementwise_affine=False)
    assert plain.weight is None and plain.bias is None and plain.state_dict() == {}
    np.testing.assert_allclose(plain(dg.ag_tensor(x)).numpy(), normed, rtol=1e-5, atol=1e-6)
    affine = dg.nn.LayerNorm((2, 3))
    assert affine.weight.shape == (2, 3) and list(affine.state_dict()) == ["weight", "bias"]
    affine.load_state_dict({"weight": np.full((2, 3), 2.0, np.float32),
                            "bias": np.ones((2, 3), np.float32)})
    with dg.with_grad_tape():
        y = affine(dg.ag_tensor(x))
        dg.sum(y).backward()
    np.testing.assert_allclose(y.numpy(), 2.0 * normed + 1.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(affine.bias.grad.numpy(), np.full((2, 3), 4.0))
    with pytest.raises(dg.ShapeError, match=r"LayerNorm: argument 'x'.*trailing axes"):
        plain(dg.ag_tensor(x[:, :1]))


def test_embedding_padding_row_starts_at_zero_and_takes_no_gradient(device):
    dg.manual_seed(3)
    table = dg.nn.Embedding(5, 3, padding_idx=-4)          # row 1
    assert table.padding_idx == 1
    np.testing.assert_array_equal(table.weight.numpy()[1], 0.0)
    table.load_state_dict({"weight": np.arange(15, dtype=np.float32).reshape(5, 3)})
    idx = np.array([[1, 2, 1], [0, 4, 1]])
    with dg.with_grad_tape():
        out = table(idx)
        dg.sum(out * out).backward()
    values = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(out.numpy(), values[idx])     # the row is still read
    expected = np.zeros((5, 3), np.float32)
    for i in idx.reshape(-1):
        if i != 1:
            expected[i] += 2 * values[i]
    np.testing.assert_array_equal(table.weight.grad.numpy(), expected)
