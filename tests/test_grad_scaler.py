"""dg.GradScaler: PyTorch's dynamic loss scaling, on both backends."""
import numpy as np
import pytest

import dualgrad as dg


def _setup(rng, scale=2.0 ** 10, **kwargs):
    model = dg.nn.Sequential(dg.nn.Linear(4, 6), dg.nn.Tanh(), dg.nn.Linear(6, 2))
    opt = dg.optim.SGD(model.parameters(), lr=0.1)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    return model, opt, dg.GradScaler(init_scale=scale, **kwargs), x


def _backward(model, scaler, x, factor=1.0):
    with dg.with_grad_tape():
        with dg.autocast("float16"):
            loss = (model(dg.ag_tensor(x)) * factor).sum()
        scaler.scale(loss).backward()
    return loss


def _scaled_step(model, opt, scaler, x) -> None:
    """One training step through the scaler."""
    _backward(model, scaler, x)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()


def _values(model):
    return [p.numpy().copy() for p in model.parameters()]


def test_a_step_uses_the_unscaled_gradients(device, rng):
    model, opt, scaler, x = _setup(rng)
    _backward(model, scaler, x)
    scaled = [p.grad.numpy().copy() for p in model.parameters()]
    before = _values(model)
    scaler.step(opt)
    scaler.update()
    for p, g, w in zip(model.parameters(), scaled, before):
        unscaled = g * np.float32(1 / 2.0 ** 10)     # (a power of two: exact)
        np.testing.assert_allclose(p.numpy(), w - np.float32(0.1) * unscaled, rtol=1e-6,
                                   atol=1e-7)
    assert scaler.get_scale() == 2.0 ** 10


def test_a_step_with_an_inf_gradient_is_skipped_and_the_scale_backs_off(device, rng):
    model, opt, scaler, x = _setup(rng, scale=2.0 ** 20)
    _backward(model, scaler, x, factor=1e3)         # float16 gradients overflow to inf
    before = _values(model)
    assert scaler.step(opt) is None
    scaler.update()
    for p, w in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), w)
    assert scaler.get_scale() == 2.0 ** 19
    assert all(not s for s in opt.state)            # no optimizer state was made either


def test_the_scale_grows_after_growth_interval_good_steps(device, rng):
    model, opt, scaler, x = _setup(rng, growth_interval=3)
    for k in range(6):
        _scaled_step(model, opt, scaler, x)
        assert scaler.get_scale() == 2.0 ** (10 + (k + 1) // 3)
    assert scaler.state_dict()["_growth_tracker"] == 0


def test_the_scale_is_float32_and_does_not_grow_past_its_range(device, rng):
    """As PyTorch's: the scale is kept and multiplied in float32, and a growth that would
    not be finite there is not applied (2^127 stays 2^127, not 2^128 = inf in float32)."""
    model, opt, scaler, x = _setup(rng, scale=2.0 ** 127, growth_interval=1)
    for param in model.parameters():
        param.grad = np.full(param.shape, 1e-30, np.float32)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 127
    scaler = dg.GradScaler(init_scale=9000.0, growth_factor=1.3, growth_interval=1)
    for param in model.parameters():
        param.grad = np.ones(param.shape, np.float32)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == float(np.float32(9000.0) * np.float32(1.3))


def test_unscale_once_between_updates_and_state_round_trip(device, rng):
    model, opt, scaler, x = _setup(rng)
    _backward(model, scaler, x)
    scaler.unscale_(opt)
    # calls out of order: RuntimeErrors, as PyTorch's (and ValueErrors, as they were)
    with pytest.raises(RuntimeError, match="already called") as caught:
        scaler.unscale_(opt)
    assert isinstance(caught.value, (dg.CallOrderError, dg.InvalidValueError))
    dg.clip_grad_norm(model.parameters(), 1.0)      # on unscaled gradients
    scaler.step(opt)
    with pytest.raises(dg.CallOrderError, match="already called"):
        scaler.step(opt)
    scaler.update()
    other = dg.GradScaler()
    other.load_state_dict(scaler.state_dict())
    assert other.state_dict() == scaler.state_dict()
    with pytest.raises(dg.InvalidValueError, match="keys"):
        other.load_state_dict({"scale": 2.0})
    assert other.get_scale() == scaler.get_scale()  # (unchanged by the failed load)


def test_disabled_it_passes_everything_through(device, rng):
    model, opt, _, x = _setup(rng)
    scaler = dg.GradScaler(enabled=False)
    loss = _backward(model, scaler, x)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    scaler.step(opt)
    scaler.update()
    assert scaler.state_dict() == {}


@pytest.mark.parametrize("kwargs, match", [
    ({"init_scale": 0}, "init_scale"), ({"growth_factor": 1.0}, "growth_factor"),
    ({"backoff_factor": 1.0}, "backoff_factor"), ({"growth_interval": 0}, "growth_interval"),
    ({"enabled": 1}, "enabled")])
def test_a_bad_argument_is_named(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        dg.GradScaler(**kwargs)


def test_its_state_travels_in_a_checkpoint(device, rng, tmp_path):
    model, opt, scaler, x = _setup(rng, growth_interval=1)
    for _ in range(2):
        _scaled_step(model, opt, scaler, x)
    dg.save_checkpoint(tmp_path / "run.ckpt", model, opt, scaler=scaler)
    other = dg.GradScaler()
    dg.load_checkpoint(tmp_path / "run.ckpt", model, opt, scaler=other)
    assert other.state_dict() == scaler.state_dict() and other.get_scale() == 2.0 ** 12
    dg.save_checkpoint(tmp_path / "plain.ckpt", model)
    with pytest.raises(dg.CheckpointError, match="GradScaler"):
        dg.load_checkpoint(tmp_path / "plain.ckpt", model, scaler=dg.GradScaler())
