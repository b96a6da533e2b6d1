"""batch_norm (running statistics, train and eval), group_norm and rms_norm against NumPy
float64 references on both backends; their layers' buffers in state_dicts, checkpoints and
captured steps; gradients in float64; bad arguments that change nothing."""
import numpy as np
import pytest

import dualgrad as dg
from dualgrad import nn
from conftest import train_step

RNG = np.random.default_rng(8)
X = (RNG.standard_normal((4, 3, 5, 6)) * 2 + 1).astype(np.float32)


def normalise(x, axes, eps):
    x = x.astype(np.float64)
    mu = x.mean(axes, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axes, keepdims=True) + eps)


def test_batch_norm_trains_on_the_batch_and_moves_the_running_statistics(device):
    rm, rv = dg.ag_param(np.zeros(3)), dg.ag_param(np.ones(3))    # (any persistent tensor)
    w, b = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    y = dg.batch_norm(dg.ag_tensor(X), rm, rv, w, b, training=True, momentum=0.25)
    want = normalise(X, (0, 2, 3), 1e-5) * w[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    n = X.size // 3
    np.testing.assert_allclose(rm.numpy(), 0.25 * X.mean((0, 2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv.numpy(), 0.75 + 0.25 * X.var((0, 2, 3)) * n / (n - 1),
                               rtol=1e-5)
    # not training: the running statistics, untouched
    before = rm.numpy().copy()
    y = dg.batch_norm(dg.ag_tensor(X), rm, rv, training=False)
    want = (X - before[:, None, None]) / np.sqrt(rv.numpy()[:, None, None] + 1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(rm.numpy(), before)


def test_group_norm_and_rms_norm(device):
    w = RNG.standard_normal(3).astype(np.float32)
    y = dg.group_norm(dg.ag_tensor(X), 1, w)
    np.testing.assert_allclose(y.numpy(), normalise(X, (1, 2, 3), 1e-5) * w[:, None, None],
                               rtol=1e-5, atol=1e-5)
    grouped = dg.group_norm(dg.ag_tensor(X), 3, eps=0.1).numpy()
    np.testing.assert_allclose(grouped, normalise(X, (2, 3), 0.1), rtol=1e-5, atol=1e-5)
    r = dg.rms_norm(dg.ag_tensor(X), (5, 6), eps=1e-3).numpy()
    x64 = X.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean((2, 3), keepdims=True) + 1e-3)
    np.testing.assert_allclose(r, want, rtol=1e-5)
    default = dg.rms_norm(dg.ag_tensor(X), 6).numpy()        # eps: float32's epsilon
    want = x64 / np.sqrt((x64 ** 2).mean(3, keepdims=True) + np.finfo(np.float32).eps)
    np.testing.assert_allclose(default, want, rtol=1e-5)


@pytest.mark.parametrize("name, fn, shapes", [
    ("batch_norm", lambda x, w, b: dg.batch_norm(x, None, None, w, b, training=True),
     [(3, 2, 3, 2), (2,), (2,)]),
    ("batch_norm 1d", lambda x: dg.batch_norm(x, None, None, training=True), [(5, 3)]),
    ("group_norm", lambda x, w: dg.group_norm(x, 2, w, eps=1e-3), [(2, 4, 3), (4,)]),
    ("rms_norm", lambda x, w: dg.rms_norm(x, (3, 2), w), [(2, 3, 2), (3, 2)]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gradients_by_finite_differences(name, fn, shapes):
    assert dg.gradcheck(fn, tuple(RNG.standard_normal(s) for s in shapes))


def test_batch_norm_layers_keep_pytorchs_buffers(device):
    bn = nn.BatchNorm2d(3, momentum=0.5)
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    for _ in range(2):
        bn(dg.ag_tensor(X))
    assert bn.num_batches_tracked.numpy() == 2
    mean = X.mean((0, 2, 3))
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.75 * mean, rtol=1e-5, atol=1e-6)
    bn.eval()
    frozen = bn.state_dict()
    y = bn(dg.ag_tensor(X)).numpy()
    want = (X - frozen["running_mean"][:, None, None]) / np.sqrt(
        frozen["running_var"][:, None, None] + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    assert bn.num_batches_tracked.numpy() == 2
    # without running statistics, the batch's in both modes
    free = nn.BatchNorm1d(3, affine=False, track_running_stats=False).eval()
    assert free.state_dict() == {}
    x = X[:, :, 0, 0]
    np.testing.assert_allclose(free(dg.ag_tensor(x)).numpy(), normalise(x, (0,), 1e-5),
                               rtol=1e-5, atol=1e-5)


def test_buffers_round_trip_through_checkpoints_and_state_dicts(device, tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 2, 1), nn.BatchNorm2d(2))
    opt = dg.optimizer_sgd(model.parameters(), lr=0.1)
    model(dg.ag_tensor(X))
    dg.save_checkpoint(tmp_path / "ck", model, opt)
    other = nn.Sequential(nn.Conv2d(3, 2, 1), nn.BatchNorm2d(2))
    dg.load_checkpoint(tmp_path / "ck", other, dg.optimizer_sgd(other.parameters(), lr=0.1))
    for (k, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=k)
    assert other[1].num_batches_tracked.numpy() == 1
    with pytest.raises(dg.InvalidValueError, match="missing.*running_var"):
        state = model.state_dict()
        del state["1.running_var"]
        other.load_state_dict(state)


@pytest.mark.gpu
def test_a_captured_step_moves_the_running_statistics_at_each_replay(gpu):
    def make():
        dg.manual_seed(2)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                              nn.Linear(4 * 3 * 4, 2), nn.BatchNorm1d(2))
        return model, dg.optimizer_adam(model.parameters(), lr=1e-2)
    (model, opt), (model2, opt2) = make(), make()
    step = dg.capture_step(lambda x, y: train_step(model2, opt2, x, y))
    for k in range(5):
        x = np.random.default_rng(k).standard_normal((4, 3, 5, 6)).astype(np.float32)
        y = np.arange(4) % 2
        assert step(x, y).item() == train_step(model, opt, x, y).item(), k
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert model2[1].num_batches_tracked.numpy() == 5
    assert step.replays >= 1 and step.reason == ""


@pytest.mark.parametrize("call, error, pattern", [
    (lambda x, s: dg.batch_norm(x, *s, training=False, momentum=2.0), dg.InvalidValueError,
     r"^batch_norm: argument 'momentum'"),
    (lambda x, s: dg.batch_norm(x, *s, training=True, weight=np.ones(4)), dg.ShapeError,
     r"^batch_norm: argument 'weight'"),
    (lambda x, s: dg.batch_norm(x[:1, :, :1, :1], *s, training=True), dg.ShapeError,
     r"^batch_norm: argument 'input'.*more than one value"),
    (lambda x, s: dg.batch_norm(x, None, None), dg.InvalidValueError,
     r"^batch_norm: running_mean and running_var"),
    (lambda x, s: dg.batch_norm(x, np.zeros(3), s[1], training=True), dg.ArgumentTypeError,
     r"^batch_norm: argument 'running_mean'"),
    (lambda x, s: dg.group_norm(x, 2), dg.ShapeError, r"^group_norm: argument 'input'"),
    (lambda x, s: dg.rms_norm(x, (5, 5)), dg.ShapeError, r"^rms_norm: argument 'input'"),
    (lambda x, s: nn.BatchNorm2d(3)(x[0]), dg.ShapeError, r"^BatchNorm2d: argument 'input'"),
    (lambda x, s: nn.BatchNorm1d(3, momentum=None), dg.InvalidValueError,
     r"^BatchNorm1d: argument 'momentum'"),
    (lambda x, s: nn.GroupNorm(2, 3), dg.InvalidValueError,
     r"^GroupNorm: argument 'num_channels'"),
])
def test_bad_arguments_name_themselves_and_change_nothing(device, call, error, pattern):
    stats = (dg.ag_param(np.zeros(3)), dg.ag_param(np.ones(3)))
    with pytest.raises(error, match=pattern):
        call(dg.ag_tensor(X), stats)
    np.testing.assert_array_equal(stats[0].numpy(), 0)
    np.testing.assert_array_equal(stats[1].numpy(), 1)
