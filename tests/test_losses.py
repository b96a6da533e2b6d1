"""Losses and gather: values against NumPy references written from PyTorch's documented
formulas, every reduction, gradients by float64 finite differences (cpu) and gpu against
cpu, targets that are ignored or weighted, capture_step, and bad arguments."""
import math

import numpy as np
import pytest

import dualgrad as dg

RNG = np.random.default_rng(3)
N, C = 7, 5
X = RNG.standard_normal((N, C))
Y = RNG.standard_normal((N, C))
P = RNG.uniform(0.02, 0.98, (N, C))
B = (RNG.uniform(size=(N, C)) > 0.5).astype(np.float64)
T = RNG.integers(0, C, N)
T_IGNORED = T.copy()
T_IGNORED[[1, 4]] = -100
W = RNG.uniform(0.5, 2.0, C)
Q = RNG.dirichlet(np.ones(C), N)


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def reduce(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def np_smooth_l1(d, beta):
    a = np.abs(d)
    return np.where(a < beta, 0.5 * a * a / beta, a - 0.5 * beta)


def np_huber(d, delta):
    a = np.abs(d)
    return np.where(a <= delta, 0.5 * a * a, delta * (a - 0.5 * delta))


def np_log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def np_class_ce(x, t, w, ignore, smoothing, reduction):
    """PyTorch's cross_entropy with class indices: (1 - e) nll + e/C smooth, both summed
    over the counted rows and divided by their weights for 'mean'."""
    logp = log_softmax(x)
    w = np.ones(x.shape[1]) if w is None else w
    counted = t != ignore
    tt = np.where(counted, t, 0)
    wt = np.where(counted, w[tt], 0.0)
    nll = -logp[np.arange(len(t)), tt] * wt
    smooth = np.where(counted, -(logp * w).sum(axis=1), 0.0)
    per = (1 - smoothing) * nll + smoothing / x.shape[1] * smooth
    if reduction == "mean":
        return per.sum() / wt.sum()
    return reduce(per, reduction)


def np_prob_ce(x, q, w, smoothing, reduction):
    c = x.shape[1]
    q = q * (1 - smoothing) + smoothing / c
    w = np.ones(c) if w is None else w
    return reduce(-(log_softmax(x) * q * w).sum(axis=1), reduction)


def np_kl(logp, t, reduction, log_target=False):
    if log_target:
        loss = np.exp(t) * (t - logp)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(t > 0, t * (np.log(t) - logp), 0.0)
    if reduction == "batchmean":
        return loss.sum() / logp.shape[0]
    return reduce(loss, reduction)


def np_cosine(a, b, dim, eps=1e-8):
    def unit(x):
        return x / np.maximum(np.sqrt((x * x).sum(dim, keepdims=True)), eps)
    return (unit(a) * unit(b)).sum(dim)


# name: (our loss of the arrays, the reference, the arrays (differentiated))
CASES = {}
for _r in ("mean", "sum", "none"):
    CASES.update({
        f"mse-{_r}": (lambda a, b, r=_r: dg.mse_loss(a, b, r),
                      lambda a, b, r=_r: reduce((a - b) ** 2, r), (X, Y)),
        f"l1-{_r}": (lambda a, b, r=_r: dg.l1_loss(a, b, r),
                     lambda a, b, r=_r: reduce(np.abs(a - b), r), (X, Y)),
        f"smooth_l1-{_r}": (lambda a, b, r=_r: dg.smooth_l1_loss(a, b, r, beta=0.7),
                            lambda a, b, r=_r: reduce(np_smooth_l1(a - b, 0.7), r), (X, Y)),
        f"huber-{_r}": (lambda a, b, r=_r: dg.huber_loss(a, b, r, delta=0.7),
                        lambda a, b, r=_r: reduce(np_huber(a - b, 0.7), r), (X, Y)),
        f"bce-{_r}": (lambda p, r=_r: dg.binary_cross_entropy(p, B, W, r),
                      lambda p, r=_r: reduce(-(B * np.log(p) + (1 - B) * np.log1p(-p)) * W, r),
                      (P,)),
        f"bce_logits-{_r}": (
            lambda x, r=_r: dg.binary_cross_entropy_with_logits(x, B, None, r, pos_weight=W),
            lambda x, r=_r: reduce(-(W * B * np_log_sigmoid(x)
                                     + (1 - B) * np_log_sigmoid(-x)), r), (X,)),
        f"nll-{_r}": (lambda x, r=_r: dg.nll_loss(dg.log_softmax(x, 1), T_IGNORED, W,
                                                  reduction=r),
                      lambda x, r=_r: np_class_ce(x, T_IGNORED, W, -100, 0.0, r), (X,)),
        f"ce-weight-ignore-smooth-{_r}": (
            lambda x, r=_r: dg.softmax_cross_entropy(x, T_IGNORED, W, label_smoothing=0.2,
                                                     reduction=r),
            lambda x, r=_r: np_class_ce(x, T_IGNORED, W, -100, 0.2, r), (X,)),
        f"ce-ignore-smooth-{_r}": (
            lambda x, r=_r: dg.softmax_cross_entropy(x, T_IGNORED, label_smoothing=0.2,
                                                     reduction=r),
            lambda x, r=_r: np_class_ce(x, T_IGNORED, None, -100, 0.2, r), (X,)),
        f"ce-ignore-class-{_r}": (   # an ignore_index that is a class
            lambda x, r=_r: dg.softmax_cross_entropy(x, T, ignore_index=int(T[0]),
                                                     reduction=r),
            lambda x, r=_r: np_class_ce(x, T, None, T[0], 0.0, r), (X,)),
        f"ce-probabilities-{_r}": (
            lambda x, r=_r: dg.softmax_cross_entropy(x, Q, W, label_smoothing=0.1,
                                                     reduction=r),
            lambda x, r=_r: np_prob_ce(x, Q, W, 0.1, r), (X,)),
        f"kl-{_r}": (lambda x, r=_r: dg.kl_div(dg.log_softmax(x, 1), Q, r),
                     lambda x, r=_r: np_kl(log_softmax(x), Q, r), (X,)),
    })
CASES.update({
    "ce-plain": (lambda x: dg.softmax_cross_entropy(x, T),
                 lambda x: np_class_ce(x, T, None, -100, 0.0, "mean"), (X,)),
    "kl-batchmean-log-target": (
        lambda x: dg.kl_div(dg.log_softmax(x, 1), np.log(Q), "batchmean", log_target=True),
        lambda x: np_kl(log_softmax(x), np.log(Q), "batchmean", True), (X,)),
    "kl-zero-targets": (lambda x: dg.kl_div(dg.log_softmax(x, 1), np.where(Q > 0.3, 0.0, Q),
                                            "sum"),
                        lambda x: np_kl(log_softmax(x), np.where(Q > 0.3, 0.0, Q), "sum"),
                        (X,)),
    "smooth_l1-beta0": (lambda a, b: dg.smooth_l1_loss(a, b, "sum", beta=0.0),
                        lambda a, b: np.abs(a - b).sum(), (X, Y)),
    "cosine-dim1": (lambda a, b: dg.cosine_similarity(a, b),
                    lambda a, b: np_cosine(a, b, 1), (X, Y)),
    "cosine-dim0": (lambda a, b: dg.cosine_similarity(a, b, dim=0),
                    lambda a, b: np_cosine(a, b, 0), (X, Y)),
    "cosine-broadcast": (lambda a: dg.cosine_similarity(a, Y[:1], dim=-1),
                         lambda a: np_cosine(a, Y[:1], -1), (X,)),
})


def _run(fn, arrays, dtype=np.float32):
    with dg.with_grad_tape():
        ts = [dg.ag_tensor(a, requires_grad=True, dtype=dtype) for a in arrays]
        out = fn(*ts)
        value = out.numpy()
        dg.sum(out).backward()
    return value, [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("name", list(CASES))
def test_loss_value(device, name):
    ours, ref, arrays = CASES[name]
    value, _ = _run(ours, arrays)
    np.testing.assert_allclose(value, ref(*arrays), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_loss_gradient_by_finite_differences(name):
    ours, _, arrays = CASES[name]
    dg.gradcheck(lambda *ts: dg.sum(ours(*ts)), list(arrays))


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_loss_gradient_on_gpu_matches_cpu(gpu, name):
    ours, _, arrays = CASES[name]
    dg.ag_device("cpu")
    _, expected = _run(ours, arrays)
    dg.ag_device("gpu")
    _, got = _run(ours, arrays)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)


def test_every_target_ignored_gives_nan_mean(device):
    t = np.full(N, -100)
    loss = dg.softmax_cross_entropy(dg.ag_tensor(X), t, label_smoothing=0.1)
    assert math.isnan(loss.item())
    assert dg.softmax_cross_entropy(dg.ag_tensor(X), t, reduction="sum").item() == 0.0


def test_ignored_rows_get_no_gradient(device):
    with dg.with_grad_tape():
        x = dg.ag_tensor(X, requires_grad=True)
        dg.softmax_cross_entropy(x, T_IGNORED, W, label_smoothing=0.3).backward()
    g = x.grad.numpy()
    assert not g[[1, 4]].any() and g[[0, 2, 3, 5, 6]].all()


def test_bce_with_logits_keeps_accuracy_at_extremes(device):
    # -log sigmoid(30) = 9.4e-14 and -log sigmoid(-30) for the other target: neither term
    # cancels against the logit (PyTorch's form loses the first)
    x = np.array([30.0, -30.0, 30.0, -30.0])
    y = np.array([1.0, 0.0, 0.0, 1.0])
    loss = dg.binary_cross_entropy_with_logits(dg.ag_tensor(x), y, reduction="none").numpy()
    np.testing.assert_allclose(loss, [9.357623e-14, 9.357623e-14, 30.0, 30.0], rtol=1e-5)


def test_bce_clamps_the_logs_at_minus_100(device):
    loss = dg.binary_cross_entropy(dg.ag_tensor([0.0, 1.0]), np.array([1.0, 0.0]),
                                   reduction="none")
    np.testing.assert_array_equal(loss.numpy(), [100.0, 100.0])


def test_cross_entropy_and_log_softmax_keep_the_log_sum_beside_big_logits(device):
    """Each row's (x - max) - log sum, not x - (max + log sum): beside logits of 1e8 or
    1e30 that sum would round log sum away (a loss of 0, a gradient of [0, 1, 0]); the
    backward recomputes the weights from the row's max and log sum the same way."""
    x = np.array([[1e8, 1e8, 0.0], [1000.0, 999.0, 990.0]], np.float32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        loss = dg.softmax_cross_entropy(t, np.array([0, 2]))
        loss.backward()
    shifted = x.astype(np.float64) - x.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    assert loss.item() == pytest.approx(-(logp[0, 0] + logp[1, 2]) / 2, rel=1e-6)
    onehot = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(t.grad.numpy(), (np.exp(logp) - onehot) / 2, rtol=1e-5,
                               atol=1e-12)
    huge = dg.log_softmax(dg.ag_tensor(np.array([1e30, 1e30, 0.0], np.float32)), 0).numpy()
    np.testing.assert_allclose(huge, [-np.log(2), -np.log(2), -1e30], rtol=1e-6)


@pytest.mark.parametrize("options", [dict(), dict(reduction="none"),
                                     dict(reduction="sum", weight=np.array([1.0, 2.0, 0.5])),
                                     dict(label_smoothing=0.1, ignore_index=1)],
                         ids=["fused", "none", "weighted sum", "smoothed, ignoring"])
def test_cross_entropy_takes_scores_per_position_as_pytorch(device, options):
    """(N, C, d1, d2) scores and (N, d1, d2) targets: the loss of the rows (N d1 d2, C), the
    classes moved last, "none" in the positions' shape; gradients back in place."""
    r = np.random.default_rng(9)
    x = r.standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = r.integers(0, 3, (2, 4, 5))
    rows = np.ascontiguousarray(np.moveaxis(x, 1, -1)).reshape(-1, 3)
    with dg.with_grad_tape():
        a = dg.ag_tensor(x, requires_grad=True)
        loss = dg.softmax_cross_entropy(a, t, **options)
        dg.sum(loss).backward()
        got = loss.numpy()
    with dg.with_grad_tape():
        b = dg.ag_tensor(rows, requires_grad=True)
        want = dg.softmax_cross_entropy(b, t.reshape(-1), **options)
        dg.sum(want).backward()
        want = want.numpy()
    assert got.shape == ((2, 4, 5) if options.get("reduction") == "none" else ())
    np.testing.assert_allclose(got.reshape(-1), want.reshape(-1), rtol=1e-6)
    np.testing.assert_allclose(np.moveaxis(a.grad.numpy(), 1, -1).reshape(-1, 3),
                               b.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_cross_entropy_and_nll_of_one_sample(device):
    x = np.array([0.5, -1.0, 2.0], np.float32)
    loss = dg.softmax_cross_entropy(dg.ag_tensor(x), np.array(2), reduction="none")
    assert loss.shape == ()
    assert loss.item() == pytest.approx(np.log(np.exp(x.astype(np.float64)).sum()) - 2.0)
    assert dg.nll_loss(dg.ag_tensor(x), np.array(1)).item() == 1.0
    with pytest.raises(dg.ShapeError, match=r"argument 'targets' has shape \(2,\)"):
        dg.softmax_cross_entropy(dg.ag_tensor(x), np.array([1, 2]))


def test_bce_gradients_stay_finite_at_probabilities_0_and_1(device):
    """PyTorch's (p - y) / max(p (1 - p), 1e-12): 0 where the target is met, +-1e12 where
    it is missed by a saturated probability (the clamped logs' own gradients are NaN)."""
    with dg.with_grad_tape():
        p = dg.ag_tensor(np.array([0.0, 0.0, 1.0, 1.0, 0.25], np.float32), requires_grad=True)
        dg.sum(dg.binary_cross_entropy(p, np.array([0.0, 1.0, 0.0, 1.0, 1.0]),
                                       reduction="none")).backward()
    np.testing.assert_allclose(p.grad.numpy(), [0.0, -1e12, 1e12, 0.0, -4.0], rtol=1e-6)


@pytest.mark.parametrize("loss, slope, outside", [
    (lambda a, b: dg.smooth_l1_loss(a, b, reduction="sum", beta=0.5), 2.0, 1.0),
    (lambda a, b: dg.huber_loss(a, b, reduction="sum", delta=0.5), 1.0, 0.5)],
    ids=["smooth_l1", "huber"])
def test_huber_gradients_of_small_differences_are_not_rounded_against_1(device, loss, slope,
                                                                        outside):
    """slope d inside |d| < 0.5 (d / beta, d), outside +-(1, delta): the small d's exactly,
    where a sum of a quadratic and a linear part rounded them against 1 (steps of 6e-8)."""
    d = np.array([1e-9, 3e-8, -2e-7, 0.25, 2.0, -3.0], np.float32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(d, requires_grad=True)
        loss(t, np.zeros(6, np.float32)).backward()
    expected = np.where(np.abs(d) < 0.5, slope * d, outside * np.sign(d))
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-6)


def test_cosine_similarity_clamps_each_norm(device):
    """Norms of 1.7e-5 each: their product is below eps = 1e-8, but neither norm is, so the
    cosine is the true one (PyTorch's clamp of the product gave 0.03)."""
    a, b = np.array([1e-5, 1e-5, 1e-5], np.float32), np.array([0.0, 1e-5, 2e-5], np.float32)
    got = dg.cosine_similarity(dg.ag_tensor(a), dg.ag_tensor(b), dim=0).item()
    assert got == pytest.approx(3e-10 / np.sqrt(3e-10 * 5e-10), rel=1e-5)


# -- gather --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dim, index_shape", [
    ((6, 5), 1, (6, 9)), ((6, 5), 0, (11, 5)), ((6, 5), -1, (6, 0)),
    ((3, 4, 5), 1, (3, 7, 5)), ((3, 4, 5), 2, (3, 4, 2)), ((2, 3, 2, 4), 0, (5, 3, 2, 4)),
    ((8,), 0, (12,)), ((6, 5), 1, (4, 9)), ((3, 4, 5), 1, (2, 7, 3)),   # (smaller: cropped)
])
def test_gather_values_and_scatter_added_gradient(device, shape, dim, index_shape):
    x = RNG.standard_normal(shape)
    idx = RNG.integers(0, shape[dim], index_shape)
    g = RNG.standard_normal(index_shape)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        out = dg.gather(t, dim, idx)
        out.backward(g)
    grid = np.indices(index_shape)
    grid[dim % len(shape)] = idx
    np.testing.assert_array_equal(out.numpy(), x[tuple(grid)].astype(np.float32))
    expected = np.zeros(shape)
    np.add.at(expected, tuple(grid), g.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-6, atol=1e-6)


def test_gather_gradient_by_finite_differences():
    idx = RNG.integers(0, 4, (3, 6))
    dg.gradcheck(lambda t: dg.gather(t, 1, idx), [RNG.standard_normal((3, 4))])


# -- inside capture_step ---------------------------------------------------------------------

@pytest.mark.gpu
def test_losses_with_options_replay(gpu):
    dg.manual_seed(0)
    model = dg.nn.Linear(C, C)
    opt = dg.optim.SGD(model.parameters(), lr=0.1)
    weight = dg.ag_tensor(W)

    def step(x, t, q):
        with dg.with_grad_tape():
            logits = model(dg.ag_tensor(x))
            loss = dg.add(dg.softmax_cross_entropy(logits, t, weight, label_smoothing=0.1),
                          dg.kl_div(dg.log_softmax(logits, 1), q, "batchmean"))
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    captured = dg.capture_step(step)
    batches = []
    for k in range(5):
        t = RNG.integers(0, C, N)
        t[k % N] = -100                       # a different row ignored each batch
        batches.append((RNG.standard_normal((N, C)), t, RNG.dirichlet(np.ones(C), N)))
    losses = [captured(*b).item() for b in batches]
    assert captured.replayable and captured.replays == 3, captured.reason
    # the same steps run eagerly from the same start
    dg.manual_seed(0)
    model2 = dg.nn.Linear(C, C)
    opt2 = dg.optim.SGD(model2.parameters(), lr=0.1)
    model, opt = model2, opt2
    eager = [step(x.astype(np.float32), t.astype(np.int32), q.astype(np.float32)).item()
             for x, t, q in batches]
    np.testing.assert_allclose(losses, eager, rtol=1e-6)


# -- bad arguments ---------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, pattern", [
    (lambda: dg.mse_loss(X, Y, reduction="avg"), dg.InvalidValueError,
     r"^mse_loss: argument 'reduction' is 'avg'; expected one of 'mean', 'sum', 'none'"),
    (lambda: dg.l1_loss(X, Y[:3]), dg.ShapeError, r"^l1_loss: argument 'target'"),
    (lambda: dg.smooth_l1_loss(X, Y, beta=-1.0), dg.InvalidValueError,
     r"^smooth_l1_loss: argument 'beta'"),
    (lambda: dg.huber_loss(X, Y, delta=0.0), dg.InvalidValueError,
     r"^huber_loss: argument 'delta'"),
    (lambda: dg.binary_cross_entropy(P, B, weight=np.ones(3)), dg.ShapeError,
     r"^binary_cross_entropy: argument 'weight'"),
    (lambda: dg.nll_loss(X, T, weight=np.ones(C + 1)), dg.ShapeError,
     r"^nll_loss: argument 'weight' has shape \(6,\); expected \(5,\): one weight per class"),
    (lambda: dg.nll_loss(X, np.array([0, 1, 2, 3, 4, 5, -1])), dg.InvalidValueError,
     r"^nll_loss: argument 'target' holds index 5; expected indices in \[0, 5\) or "
     r"ignore_index \(-100\)"),
    (lambda: dg.nll_loss(X, T, ignore_index=1.5), dg.ArgumentTypeError,
     r"^nll_loss: argument 'ignore_index'"),
    (lambda: dg.softmax_cross_entropy(X, T, label_smoothing=1.5), dg.InvalidValueError,
     r"^softmax_cross_entropy: argument 'label_smoothing'"),
    (lambda: dg.softmax_cross_entropy(X, T_IGNORED, W, ignore_index=-1), dg.InvalidValueError,
     r"^softmax_cross_entropy: argument 'targets' holds index -100"),
    (lambda: dg.kl_div(X, Q, reduction="batch"), dg.InvalidValueError,
     r"^kl_div: argument 'reduction'.*'batchmean'"),
    (lambda: dg.cosine_similarity(X, Y, dim=2), dg.InvalidValueError,
     r"^cosine_similarity: argument 'dim'"),
    (lambda: dg.gather(X, 2, T), dg.InvalidValueError, r"^gather: argument 'dim'"),
    (lambda: dg.gather(X, 1, np.array([[0, 5]] * N)), dg.InvalidValueError,
     r"^gather: argument 'index' holds index 5; expected indices in \[0, 5\)"),
    (lambda: dg.gather(X, 1, np.zeros((N + 1, 2), np.int64)), dg.ShapeError,
     r"^gather: argument 'index' has shape \(8, 2\); expected x's rank, and at most x's"),
    (lambda: dg.gather(X, 1, np.zeros((N, 2))), dg.ArgumentTypeError,
     r"^gather: argument 'index' has dtype float64"),
])
def test_bad_arguments_are_named(device, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# -- the modules -------------------------------------------------------------------------------

MODULES = [
    (lambda: dg.nn.MSELoss(reduction="sum"), lambda a, b: dg.mse_loss(a, b, "sum"), (X, Y)),
    (lambda: dg.nn.L1Loss(), dg.l1_loss, (X, Y)),
    (lambda: dg.nn.SmoothL1Loss(beta=0.5), lambda a, b: dg.smooth_l1_loss(a, b, beta=0.5),
     (X, Y)),
    (lambda: dg.nn.HuberLoss(delta=2.0), lambda a, b: dg.huber_loss(a, b, delta=2.0), (X, Y)),
    (lambda: dg.nn.BCELoss(weight=W), lambda p, b: dg.binary_cross_entropy(p, b, W), (P, B)),
    (lambda: dg.nn.BCEWithLogitsLoss(pos_weight=W),
     lambda x, b: dg.binary_cross_entropy_with_logits(x, b, pos_weight=W), (X, B)),
    (lambda: dg.nn.NLLLoss(weight=W), lambda x, t: dg.nll_loss(x, t, W), (X, T_IGNORED)),
    (lambda: dg.nn.CrossEntropyLoss(W, label_smoothing=0.1, reduction="none"),
     lambda x, t: dg.softmax_cross_entropy(x, t, W, label_smoothing=0.1, reduction="none"),
     (X, T_IGNORED)),
    (lambda: dg.nn.KLDivLoss(reduction="batchmean"),
     lambda x, q: dg.kl_div(x, q, "batchmean"), (X, Q)),
    (lambda: dg.nn.CosineSimilarity(dim=0), lambda a, b: dg.cosine_similarity(a, b, 0), (X, Y)),
]


@pytest.mark.parametrize("k", range(len(MODULES)))
def test_loss_modules_apply_their_function(device, k):
    make, fn, (a, b) = MODULES[k]
    module = make()
    first = dg.ag_tensor(a)
    second = b if b.dtype.kind == "i" else dg.ag_tensor(b)
    np.testing.assert_array_equal(module(first, second).numpy(), fn(first, second).numpy())


def test_loss_modules_check_their_arguments_when_made():
    with pytest.raises(dg.InvalidValueError, match=r"^CrossEntropyLoss: argument 'reduction'"):
        dg.nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(dg.InvalidValueError, match=r"^HuberLoss: argument 'delta'"):
        dg.nn.HuberLoss(delta=-1.0)
    with pytest.raises(dg.ArgumentTypeError, match=r"^NLLLoss: argument 'ignore_index'"):
        dg.nn.NLLLoss(ignore_index="none")
    assert dg.nn.KLDivLoss(reduction="batchmean").reduction == "batchmean"
