"""Every gpu kernel against its cpu twin, forward and backward, under the tolerance table of
dualgrad.testing: the same inputs go to both backends' primitives directly."""
import numpy as np
import pytest

from dualgrad.api import device
from dualgrad.cpu import CpuBackend
from dualgrad.cpu.elementwise import BINARY_OPS, UNARY_OPS
from dualgrad import testing

pytestmark = pytest.mark.gpu
CPU = CpuBackend()


def twin(gpu, name, *args, **kwargs):
    """Run primitive ``name`` on both backends; float32 arrays become each backend's
    storage, int arrays index storage, other arguments pass through. Returns (cpu, gpu)
    results as float32 arrays (tuples for multi-output kernels)."""
    def prepare(backend, a):
        if isinstance(a, (np.ndarray, np.generic)):
            a = np.asarray(a)
            return backend.indices(a) if a.dtype.kind in "iu" else backend.upload(a)
        return a

    def fetch(backend, out):
        if isinstance(out, tuple):
            return tuple(fetch(backend, o) for o in out)
        return np.asarray(backend.download(out) if backend is gpu else out)
    results = []
    for backend in (CPU, gpu):
        out = getattr(backend, name)(*[prepare(backend, a) for a in args], **kwargs)
        results.append(fetch(backend, out))
    return results


@pytest.fixture
def gb(gpu):
    return device.active()


def assert_agree(key, got, ref, **context):
    """dualgrad.testing.assert_agree with the active device's subnormal behaviour."""
    flushes = not device.active().ctx.info["preserves_denormals"]
    return testing.assert_agree(key, got, ref, flushes_subnormals=flushes, **context)


def f32(rng, *shape, lo=-3.0, hi=3.0):
    return np.asarray(rng.uniform(lo, hi, shape), dtype=np.float32)


# Inputs per unary op: where it is defined and differentiable, plus its edge values.
DOMAIN = {"log": (0.01, 50.0), "sqrt": (0.0, 50.0), "pow_scalar": (0.05, 4.0),
          "rdiv_scalar": (0.2, 5.0), "exp": (-20.0, 20.0), "tanh": (-6.0, 6.0),
          "sigmoid": (-30.0, 30.0), "gelu": (-9.0, 9.0)}
# What each op's error grows with (the tolerance table's arg(x)): for pow, t = y log2 x,
# the argument of the exp2 that computes it.
GROWTH = {"pow_scalar": lambda x, a: a * np.log2(np.abs(x)),
          "rpow_scalar": lambda x, a: x * np.log2(a)}
PARAMS = {"add_scalar": (1.25, 0.0), "mul_scalar": (-0.7, 0.0), "div_scalar": (3.0, 0.0),
          "rsub_scalar": (2.5, 0.0), "rdiv_scalar": (1.5, 0.0), "pow_scalar": (2.7, 0.0),
          "rpow_scalar": (1.7, 0.0), "clamp": (-0.5, 0.75)}


@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("n", [1, 7, 4099])
def test_unary_forward_and_backward(gb, rng, op, n):
    lo, hi = DOMAIN.get(op, (-4.0, 4.0))
    x = f32(rng, n, lo=lo, hi=hi)
    if op in ("relu", "abs", "clamp", "neg") and n > 4:
        x[:4] = [0.0, -0.0, 0.75, -0.5]          # edges: signed zeros, the clamp bounds
    a, b = PARAMS.get(op, (0.0, 0.0))
    growth = GROWTH.get(op, lambda x, a: x)(x.astype(np.float64), a)
    (cy, gy) = twin(gb, "unary", op, x, a, b)
    assert_agree(f"unary:{op}", gy, cy, x=growth)
    g = f32(rng, n)
    (cg, gg) = twin(gb, "unary_backward", op, x, cy, g, a, b)
    assert_agree(f"unary_backward:{op}", gg, cg, x=growth, scale=np.abs(g * cy))


def test_unary_special_values(gb):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38],
                 np.float32)
    for op in ("neg", "abs", "relu", "exp", "tanh", "sigmoid"):
        cy, gy = twin(gb, "unary", op, x)
        assert_agree(f"unary:{op}", gy, cy, x=np.nan_to_num(x))
    cy, gy = twin(gb, "unary", "clamp", x, -1.0, 1.0)
    assert_agree("unary:clamp", gy, cy)


SHAPES = [((5, 7), (5, 7)), ((5, 7), (7,)), ((5, 1), (1, 7)), ((3, 1, 4), (2, 1)),
          ((1,), (2, 3, 4, 5)), ((2, 1, 3, 1), (1, 4, 1, 6)), ((), (3,)), ((4099,), (4099,))]


@pytest.mark.parametrize("op", BINARY_OPS)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_forward_and_backward(gb, rng, op, shapes):
    x, y = f32(rng, *shapes[0]), f32(rng, *shapes[1])
    if op == "pow":
        x = np.abs(x) + np.float32(0.1)
    if op == "div":
        y = np.where(np.abs(y) < 0.1, np.float32(0.5), y)
    cz, gz = twin(gb, "binary", op, x, y)
    assert_agree(f"binary:{op}", gz, cz, x=np.broadcast_to(np.abs(y) * 4, cz.shape))
    g = f32(rng, *cz.shape)
    (cgx, cgy), (ggx, ggy) = twin(gb, "binary_backward", op, x, y, g)
    key = f"binary_backward:{op}"
    growth = np.broadcast_to(np.abs(y) * 4, cz.shape)      # |y log2 x| for pow's exp2
    assert_agree(key, ggx, cgx, x=growth)
    assert_agree(key, ggy, cgy, x=growth, scale=np.abs(g * cz))


def test_binary_ties_and_nan(gb):
    x = np.array([1.0, 2.0, np.nan, 3.0, np.nan], np.float32)
    y = np.array([1.0, np.nan, 2.0, 3.0, np.nan], np.float32)
    g = np.array([1.0, 1.0, 1.0, 4.0, 1.0], np.float32)
    for op in ("maximum", "minimum"):
        cz, gz = twin(gb, "binary", op, x, y)
        assert_agree(f"binary:{op}", gz, cz)
        (cgx, cgy), (ggx, ggy) = twin(gb, "binary_backward", op, x, y, g)
        assert_agree(f"binary_backward:{op}", ggx, cgx)
        assert_agree(f"binary_backward:{op}", ggy, cgy)


def test_binary_in_place(gb, rng):
    # out may alias the first operand (gradient accumulation, bias add)
    x, y = f32(rng, 6, 5), f32(rng, 5)
    h = gb.upload(x)
    gb.binary("add", h, gb.upload(y), out=h)
    np.testing.assert_array_equal(gb.download(h), x + y)


REDUCE_CASES = [((4099,), (0,)), ((6, 7), (0,)), ((6, 7), (1,)), ((6, 7), (0, 1)),
                ((3, 4, 5, 6), (1, 3)), ((3, 4, 5, 6), (0, 2, 3)), ((2, 300, 3), (1,)),
                ((5, 0, 3), (2,))]


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@pytest.mark.parametrize("shape,axes", REDUCE_CASES, ids=str)
def test_reduce_forward_and_backward(gb, rng, op, shape, axes):
    x = f32(rng, *shape)
    if op == "max" and x.size:
        x.reshape(-1)[1::5] = 2.5                 # plenty of tied maxima
    cy, gy = twin(gb, "reduce", op, x, axes, True)
    n = int(np.prod([shape[a] for a in axes]))
    scale = np.sum(np.abs(x.astype(np.float64)), axis=axes, keepdims=True)
    if op == "mean":
        scale = scale / max(n, 1)
    assert_agree(f"reduce:{op}", gy, cy, scale=scale, length=n)
    g = f32(rng, *cy.shape)
    cg, gg = twin(gb, "reduce_backward", op, x, cy, g, axes)
    assert_agree(f"reduce_backward:{op}", gg, cg)


@pytest.mark.parametrize("shape,axes", [((3, 5), (1, 0)), ((2, 3, 4), (2, 0, 1)),
                                        ((2, 3, 4, 5), (3, 1, 0, 2)), ((7,), (0,))], ids=str)
def test_permute(gb, rng, shape, axes):
    x = f32(rng, *shape)
    cy, gy = twin(gb, "permute", x, axes)
    assert_agree("permute", gy, cy)
    np.testing.assert_array_equal(gy, np.transpose(x, axes))


MATMUL_CASES = [((5, 7), (7, 3)), ((64, 64), (64, 64)), ((65, 130), (130, 67)),
                ((3, 9, 17), (3, 17, 5)), ((3, 9, 17), (17, 5)), ((9, 17), (3, 17, 5)),
                ((1, 1), (1, 1)), ((4, 0), (0, 3))]


@pytest.mark.parametrize("shapes", MATMUL_CASES, ids=str)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_matmul(gb, rng, shapes, trans_a, trans_b):
    sa, sb = shapes
    a = f32(rng, *sa)
    b = f32(rng, *sb)
    # Store the operands transposed where asked, so op(a) @ op(b) is the same product.
    a_st = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans_a else a
    b_st = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
    cc, gc = twin(gb, "matmul", a_st, b_st, trans_a, trans_b)
    scale = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert_agree("matmul", gc, cc, scale=scale, length=sa[-1])


def test_matmul_sizes_on_gpu(gb):
    rng = np.random.default_rng(5)
    for m, k, n in [(1, 1, 1), (63, 1, 65), (17, 129, 3), (2, 300, 2), (100, 33, 100)]:
        a, b = f32(rng, m, k), f32(rng, k, n)
        cc, gc = twin(gb, "matmul", a, b)
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        assert_agree("matmul", gc, cc, scale=scale, length=k)


def test_rows_beyond_the_workgroup_count_limit(gb, rng):
    # 65535 workgroups is the most a dispatch may ask for; the rest loop (grid stride).
    x = f32(rng, 70000, 2)
    cy, gy = twin(gb, "log_softmax", x)
    assert_agree("log_softmax", gy, cy, x=x - x.max(axis=1, keepdims=True),
                 scale=np.abs(cy) + 1, length=2)


@pytest.mark.parametrize("rows,n", [(1, 1), (5, 7), (3, 300), (40, 3)])
def test_softmax_family(gb, rng, rows, n):
    x = f32(rng, rows, n, lo=-8, hi=8)
    g = f32(rng, rows, n)
    spread = x - x.max(axis=1, keepdims=True)
    for kind in ("softmax", "log_softmax"):
        cy, gy = twin(gb, kind, x)
        scale = np.abs(cy) if kind == "softmax" else np.abs(np.log(np.exp(
            spread.astype(np.float64)).sum(axis=1, keepdims=True)))
        assert_agree(kind, gy, cy, x=spread, scale=np.broadcast_to(scale, cy.shape),
                     length=n)
        cg, gg = twin(gb, f"{kind}_backward", cy, g)
        mag = np.abs(cy.astype(np.float64)) * np.sum(np.abs(g * (np.exp(cy) if kind ==
                                                     "log_softmax" else cy)), axis=1,
                                                     keepdims=True) + np.abs(g)
        assert_agree(f"{kind}_backward", gg, cg, scale=mag, length=n)


@pytest.mark.parametrize("rows,n", [(1, 2), (33, 10), (7, 1000)])
def test_softmax_cross_entropy(gb, rng, rows, n):
    x = f32(rng, rows, n, lo=-6, hi=6)
    t = rng.integers(0, n, rows)
    (cl, clse), (gl, glse) = twin(gb, "softmax_cross_entropy", x, t)
    per_row = np.abs(clse) + np.abs(x[np.arange(rows), t])
    assert_agree("softmax_cross_entropy", glse, clse, scale=np.abs(clse), length=n)
    assert_agree("softmax_cross_entropy", gl, cl, scale=per_row.mean(), length=n + rows)
    g = np.array(1.7, np.float32)
    cd, gd = twin(gb, "softmax_cross_entropy_backward", x, t, clse, g)
    assert_agree("softmax_cross_entropy_backward", gd, cd, x=x - clse[:, None])


@pytest.mark.parametrize("rows,n", [(1, 1), (6, 7), (4, 513), (300, 16)])
def test_layer_norm(gb, rng, rows, n):
    x = f32(rng, rows, n) + np.float32(1.5)
    gamma, beta, g = f32(rng, n), f32(rng, n), f32(rng, rows, n)
    (cy, cm, cr), (gy, gm, gr) = twin(gb, "layer_norm", x, gamma, beta, 1e-5)
    xhat = np.abs((x - cm[:, None]) * cr[:, None])
    scale = xhat * np.abs(gamma) * n + np.abs(beta)
    assert_agree("layer_norm", gy, cy, scale=scale, length=n)
    assert_agree("layer_norm", gm, cm, scale=np.abs(x).mean(axis=1), length=n)
    assert_agree("layer_norm", gr, cr, scale=cr * n, length=n)
    (cdx, cdg, cdb), (gdx, gdg, gdb) = twin(gb, "layer_norm_backward", x, gamma, cm, cr, g)
    row = np.sum(np.abs(g * gamma), axis=1, keepdims=True) * cr[:, None] * (1 + xhat)
    assert_agree("layer_norm_backward", gdx, cdx, scale=row, length=n)
    col = np.sum(np.abs(g) * (1 + xhat), axis=0)
    assert_agree("layer_norm_backward", gdg, cdg, scale=col, length=rows)
    assert_agree("layer_norm_backward", gdb, cdb, scale=col, length=rows)


def test_embedding(gb, rng):
    table = f32(rng, 11, 6)
    idx = np.array([[3, 0, 3], [10, 3, 7]])
    cy, gy = twin(gb, "embedding", table, idx)
    assert_agree("embedding", gy, cy)
    g = f32(rng, 2, 3, 6)
    cg, gg = twin(gb, "embedding_backward", idx, g, 11)
    counts = np.bincount(idx.reshape(-1), minlength=11)[:, None]
    scale = np.zeros((11, 6))
    np.add.at(scale, idx.reshape(-1), np.abs(g.reshape(-1, 6)))
    assert_agree("embedding_backward", gg, cg, scale=scale, length=np.maximum(counts, 1))


@pytest.mark.parametrize("n,p", [(1, 0.5), (4099, 0.1), (10000, 0.9), (5, 1.0)])
def test_dropout_same_mask(gb, rng, n, p):
    x = f32(rng, n)
    for seed, step in [(0, 0), (2 ** 40 + 7, 3), (2 ** 63 + 11, 2 ** 33 + 1)]:
        cy, gy = twin(gb, "dropout", x, p, seed, step)
        assert_agree("dropout", gy, cy)
        np.testing.assert_array_equal(gy == 0, cy == 0)


@pytest.mark.parametrize("wd,decoupled", [(0.0, False), (0.1, False), (0.05, True)])
def test_adam_step_agrees(gb, rng, wd, decoupled):
    """Each step starts both backends from the same state (the cpu's), so the comparison is
    of one update; how far whole runs drift apart is the lockstep harness's business."""
    from dualgrad.api.optim import adam_hyper
    w, m, v = f32(rng, 257), np.zeros(257, np.float32), np.zeros(257, np.float32)
    for step in range(1, 6):
        g = f32(rng, 257)
        hyper = adam_hyper(1e-2, (0.9, 0.999), 1e-8, wd, step, decoupled)
        handles = [gb.upload(a) for a in (w, m, v)]
        gb.adam_step(handles[0], gb.upload(g), handles[1], handles[2], hyper)
        w0, m0, v0 = w.copy(), m.copy(), v.copy()
        CPU.adam_step(w, g, m, v, hyper)
        scales = (np.abs(w0) + np.abs(w - w0) * 2,
                  0.9 * np.abs(m0) + 0.1 * np.abs(g),
                  0.999 * np.abs(v0) + 0.001 * g * g)
        for c, h, scale in zip((w, m, v), handles, scales):
            assert_agree("adam_step", gb.download(h), c, scale=scale, length=12)


@pytest.mark.parametrize("momentum,nesterov,wd", [(0.0, False, 0.0), (0.9, False, 0.01),
                                                 (0.9, True, 0.0)])
def test_sgd_step_agrees(gb, rng, momentum, nesterov, wd):
    w, buf = f32(rng, 300), np.zeros(300, np.float32)
    for step in range(5):
        g = f32(rng, 300)
        hyper = dict(lr=0.05, momentum=momentum, dampening=0.0, wd=wd, nesterov=nesterov,
                     first=step == 0)
        hw, hbuf = gb.upload(w), gb.upload(buf)
        gb.sgd_step(hw, gb.upload(g), hbuf if momentum else None, hyper)
        w0, buf0 = w.copy(), buf.copy()
        CPU.sgd_step(w, g, buf if momentum else None, hyper)
        d = np.abs(g) + wd * np.abs(w0) + momentum * (np.abs(buf0) + np.abs(buf))
        assert_agree("sgd_step", gb.download(hw), w, scale=np.abs(w0) + 0.05 * d, length=6)
        if momentum:
            assert_agree("sgd_step", gb.download(hbuf), buf,
                         scale=momentum * np.abs(buf0) + d, length=6)


def _train_and_record(device_name, make_opt, steps, data):
    """Train a small model on one backend; after every step record the parameters and
    every optimizer state entry (host copies)."""
    import dualgrad as dg
    dg.ag_device(device_name)
    dg.manual_seed(7)
    model = dg.nn.Sequential(dg.nn.Linear(10, 24), dg.nn.Tanh(), dg.nn.LayerNorm(24),
                             dg.nn.Linear(24, 4))
    opt = make_opt(model.parameters())
    history = []
    for x, y in data[:steps]:
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x)), y)
            loss.backward()
        opt.step()
        opt.zero_grad()
        history.append((model.state_dict(), opt.state_dict()["state"], loss.item()))
    return history


@pytest.mark.parametrize("kind", ["adam", "adamw", "sgd_momentum", "sgd_nesterov"])
def test_backends_agree_after_every_optimizer_step(gpu, kind):
    import dualgrad as dg
    makers = {
        "adam": lambda p: dg.optimizer_adam(p, lr=1e-2),
        "adamw": lambda p: dg.optimizer_adamw(p, lr=1e-2, weight_decay=0.1),
        "sgd_momentum": lambda p: dg.optimizer_sgd(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
        "sgd_nesterov": lambda p: dg.optimizer_sgd(p, lr=0.1, momentum=0.9, nesterov=True),
    }
    rng = np.random.default_rng(11)
    data = [(rng.standard_normal((16, 10)).astype(np.float32), rng.integers(0, 4, 16))
            for _ in range(8)]
    ref = _train_and_record("cpu", makers[kind], 8, data)
    got = _train_and_record("gpu", makers[kind], 8, data)
    # Each step's gradients agree to a few float32 ULP (products and sums of at most 24
    # terms, ~1e-6 relative); the updates carry those differences into the weights, which
    # drift apart by at most lr * 1e-6 per step. Measured on lavapipe: 3e-7 of each
    # tensor's scale after 8 steps, for weights and state alike. The bounds allow ten times
    # that, and still catch any kernel that computes a different function.
    for step, ((cw, cs, cl), (gw, gs, gl)) in enumerate(zip(ref, got), start=1):
        assert abs(cl - gl) <= 1e-5 * (1 + abs(cl)), (step, cl, gl)
        for name in cw:
            scale = np.abs(cw[name]).max() + 1e-3
            np.testing.assert_allclose(gw[name], cw[name], rtol=0,
                                       atol=3e-6 * scale + step * 2e-7,
                                       err_msg=f"step {step}, parameter {name}")
        for i in cs:
            for key, value in cs[i].items():
                if isinstance(value, np.ndarray):
                    scale = np.abs(value).max() + 1e-12
                    np.testing.assert_allclose(gs[i][key], value, rtol=0,
                                               atol=5e-6 * scale,
                                               err_msg=f"step {step}, state {i}/{key}")
                else:
                    assert gs[i][key] == value, (step, i, key)
