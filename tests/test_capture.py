"""Step capture and replay (``dg.capture_step``): a replayed step computes bit for bit what
the same step run eagerly computes, moves only the batch and a few scalars to the device,
and is recorded anew (never replayed onto stale or freed memory) when what it recorded
changed."""
import numpy as np
import pytest

import dualgrad as dg
from conftest import train_step
from dualgrad.errors import ArgumentTypeError, DeadTensorError, InvalidValueError
from dualgrad.gpu.capture import SLOT_WORDS
from dualgrad.gpu.context import live_objects
from dualgrad.residency import set_host_data, store_weight
from dualgrad.testing import lockstep
from dualgrad.testing.models import (classifier_batches, mlp_classifier, regression,
                                     regression_batches)

nn = dg.nn


def batches(steps, batch=8, seed=0, classes=5, features=20):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, features)).astype(np.float32),
             rng.integers(0, classes, batch)) for _ in range(steps)]


# The other fused rules, with the options that change what they keep.
OTHER_RULES = {
    "rmsprop": ("RMSprop", dict(lr=1e-3, momentum=0.9, centered=True)),
    "adagrad": ("Adagrad", dict(lr=0.05, lr_decay=0.01, initial_accumulator_value=0.1)),
    "adamax": ("Adamax", dict(lr=1e-2, weight_decay=0.01)),
    "nadam": ("NAdam", dict(lr=1e-2, decoupled_weight_decay=True, weight_decay=0.01)),
    "radam": ("RAdam", dict(lr=1e-2)),       # the adaptive term joins at step 6
    "sgd_maximize": ("SGD", dict(lr=0.05, momentum=0.9, maximize=True)),
}


def make(opt_kind="adam", schedule=False):
    dg.manual_seed(7)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 5))
    if opt_kind == "adam":
        opt = dg.optimizer_adam(model.parameters(), lr=1e-2)
    elif opt_kind == "adamw":
        opt = dg.optimizer_adamw(model.parameters(), lr=1e-2, weight_decay=0.1)
    elif opt_kind == "groups":               # per-group rates and decay, one schedule
        params = list(model.parameters())
        opt = dg.optim.Adam([{"params": params[:2], "lr": 3e-2, "weight_decay": 0.01},
                             {"params": params[2:], "amsgrad": True}], lr=1e-2)
    elif opt_kind in OTHER_RULES:
        kind, hyper = OTHER_RULES[opt_kind]
        opt = getattr(dg.optim, kind)(model.parameters(), **hyper)
    else:
        opt = dg.optimizer_sgd(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    sched = dg.optim.WarmupCosineLR(opt, 3, 20) if schedule else None
    return model, opt, sched


def step_fn(model, opt):
    return lambda x, y: train_step(model, opt, x, y)


def state(model, opt) -> dict:
    """Every parameter and optimizer state entry, as host values."""
    out = {f"param {k}": v for k, v in model.state_dict().items()}
    for i, entry in opt.state_dict()["state"].items():
        for k, v in entry.items():
            out[f"state {i} {k}"] = v
    return out


def assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def slots(opt) -> int:
    """The optimizer's scalar slots in a replay: one a dispatch, and its parameters share
    one in a steady step (all at the same step count, all with momentum buffers or none)."""
    return 1


@pytest.mark.gpu
@pytest.mark.parametrize("opt_kind", ["adam", "adamw", "sgd", "groups", *OTHER_RULES])
def test_replayed_steps_agree_bit_for_bit_with_eager_gpu_steps(gpu, opt_kind):
    data = batches(20)
    model, opt, sched = make(opt_kind, schedule=True)
    eager = step_fn(model, opt)
    model2, opt2, sched2 = make(opt_kind, schedule=True)
    step = dg.capture_step(step_fn(model2, opt2))
    for n, (x, y) in enumerate(data):
        want = eager(x, y).item()
        sched.step()
        got = step(x, y).item()
        sched2.step()
        assert got == want, n
        assert_identical(state(model2, opt2), state(model, opt))
    assert step.replayable and step.reason == ""
    assert (step.captures, step.replays) == (1, len(data) - 2)
    assert sched2.get_last_lr() == sched.get_last_lr()


@pytest.mark.gpu
def test_replayed_split_k_products_agree_bit_for_bit_with_eager_ones(gpu):
    # A layer of 16 outputs over 2048 features: its forward product is split along K, and
    # the slices are added within the dispatch at counters the replay reuses each step.
    from dualgrad.gpu import plans
    assert plans.matmul_plan(8, 16, 2048, 1).splits > 1

    def deep():
        dg.manual_seed(3)
        model = nn.Sequential(nn.Linear(2048, 16), nn.ReLU(), nn.Linear(16, 5))
        return model, dg.optimizer_adam(model.parameters(), lr=1e-2)
    model, opt = deep()
    model2, opt2 = deep()
    eager, step = step_fn(model, opt), dg.capture_step(step_fn(model2, opt2))
    for n, (x, y) in enumerate(batches(8, features=2048)):
        assert step(x, y).item() == eager(x, y).item(), n
        assert_identical(state(model2, opt2), state(model, opt))
    assert step.replays == 6


@pytest.mark.gpu
def test_replayed_training_agrees_with_the_cpu_reference(gpu):
    lockstep(mlp_classifier, lambda p: dg.optimizer_adam(p, lr=1e-3),
             classifier_batches(20, batch=16), capture=True).check()
    lockstep(regression, lambda p: dg.optimizer_sgd(p, lr=0.05, momentum=0.9),
             regression_batches(20), capture=True, max_norm=1.0,
             scheduler_factory=lambda o: dg.optim.StepLR(o, 5, 0.5)).check()


@pytest.mark.gpu
def test_a_steady_replay_moves_only_the_batch_and_the_scalars(gpu):
    model, opt, _ = make()
    step = dg.capture_step(step_fn(model, opt))
    data = batches(4)
    for x, y in data[:2]:
        step(x, y)
    x, y = data[2]
    dg.reset_transfer_stats()
    loss = step(x, y)
    stats = dg.transfer_stats()
    assert stats["h2d_bytes"] == x.nbytes + y.size * 4 + slots(opt) * SLOT_WORDS * 4
    assert (stats["d2h_bytes"], stats["d2h_calls"], stats["submits"]) == (0, 0, 1)
    value = loss.item()
    assert dg.transfer_stats()["d2h_bytes"] == 4 and np.isfinite(value)


@pytest.mark.gpu
def test_a_recorded_step_reuses_its_arenas_ranges_and_replays_the_same(gpu):
    """A recorded step's intermediates that no rule saves share ranges of its arena, as
    an eager step's do (the recorded barriers order the reuse): sixteen 1 MiB sums need
    a few MiB, and the replays give the eager step's bits."""
    w = dg.ag_param(np.full((256, 1024), 0.5, np.float32))

    def chain(x):
        with dg.with_grad_tape():
            h = dg.ag_tensor(x) * w
            for _ in range(16):
                h = h + 1.0                  # (a sum by a number saves nothing)
            loss = dg.sum(h)
            loss.backward()
        w.grad = None
        return loss

    x = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)
    eager = chain(x).item()
    step = dg.capture_step(chain)
    values = [step(x).item() for _ in range(3)]
    assert values == [eager] * 3 and step.replays >= 1 and step.reason == ""
    arena = next(iter(step._recordings.values()))[0].recording.arena
    assert arena.reserved_bytes <= 8 << 20, arena.reserved_bytes     # not 18 MiB and more


@pytest.mark.gpu
def test_a_loss_of_an_earlier_replay_is_dead_not_overwritten(gpu):
    model, opt, _ = make()
    step = dg.capture_step(step_fn(model, opt))
    data = batches(4)
    step(*data[0])
    step(*data[1])
    first = step(*data[2])
    step(*data[3])
    with pytest.raises(DeadTensorError):
        first.item()


@pytest.mark.gpu
def test_a_new_shape_is_recorded_anew_and_the_old_one_kept(gpu):
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    data = batches(3, batch=8) + batches(3, batch=5, seed=1) + batches(3, batch=8, seed=2)
    for x, y in data:
        assert step(x, y).item() == eager(x, y).item()
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert step.captures == 2 and step.replays == 6


@pytest.mark.gpu
def test_a_weight_written_in_place_is_replayed_with_its_new_value(gpu):
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    data = batches(6)
    saved = None
    for n, (x, y) in enumerate(data):
        if n == 3:      # load_state_dict writes into the resident buffers (store_weight)
            model.load_state_dict(saved)
            eager_model.load_state_dict(saved)
            store_weight(model[0].bias, np.ones(32, np.float32))
            store_weight(eager_model[0].bias, np.ones(32, np.float32))
        assert step(x, y).item() == eager(x, y).item()
        if n == 1:
            saved = eager_model.state_dict()
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert step.captures == 1


@pytest.mark.gpu
@pytest.mark.parametrize("change", ["set_host_data", "optimizer_state", "checkpoint"])
def test_replaced_storage_is_recorded_anew_not_written_through_stale_addresses(gpu, change,
                                                                               tmp_path):
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    data = batches(6)
    for n, (x, y) in enumerate(data):
        if n == 3:
            for m, o in ((model, opt), (eager_model, eager_opt)):
                if change == "set_host_data":
                    set_host_data(m[2].weight, np.full((32, 32), 0.01, np.float32))
                elif change == "optimizer_state":
                    o.load_state_dict(o.state_dict())
                else:
                    path = tmp_path / f"ck{id(m)}.safetensors"
                    dg.save_checkpoint(path, m, o)
                    dg.load_checkpoint(path, m, o)
        assert step(x, y).item() == eager(x, y).item(), n
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    # A host value moves to the device during the next call, which runs eagerly; the call
    # after it is recorded.
    assert step.captures == (3 if change == "set_host_data" else 2)


@pytest.mark.gpu
def test_leaving_the_device_rescues_the_weights_and_training_goes_on_on_the_cpu(gpu):
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    data = batches(6)
    for x, y in data[:3]:
        step(x, y)
        eager(x, y)
    dg.ag_device("cpu")
    assert live_objects()["command_buffer"] == 0
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    for x, y in data[3:]:
        assert np.isfinite(step(x, y).item())
    assert not step.replayable           # on cpu each call runs the step
    replays = step.replays
    dg.ag_device("gpu")
    # The weights move back at the first call, which therefore runs eagerly; the second
    # call is recorded, the third replayed.
    for x, y in data[:3]:
        step(x, y)
    assert step.replayable and (step.captures, step.replays) == (4, replays + 1)


def test_on_the_cpu_a_captured_step_is_the_eager_step():
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    for x, y in batches(5):
        assert step(x, y).item() == eager(x, y).item()
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert not step.replayable and step.reason == ""


def _reading(model, opt):
    def fn(x, y):
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x)), y)
            loss.backward()
            loss.item()                  # a value read inside the step
        opt.step()
        opt.zero_grad()
        return loss
    return fn


def _zero_grad_first(model, opt):
    def fn(x, y):
        opt.zero_grad()                  # the step's gradients outlive it
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x)), y)
            loss.backward()
        opt.step()
        return loss
    return fn


def _host_constant(model, opt):
    def fn(x, y):
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x * 0.5)), y)
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return fn


def _synchronizing(model, opt):
    def fn(x, y):
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x)), y)
            loss.backward()
        dg.cuda.synchronize()            # (torch.cuda.synchronize(), as timing code calls it)
        opt.step()
        opt.zero_grad()
        return loss
    return fn


@pytest.mark.parametrize("body,reason", [(_reading, "reads a value"),
                                         (_zero_grad_first, "zero_grad"),
                                         (_host_constant, "not one of its arguments"),
                                         (_synchronizing, "synchronize")])
@pytest.mark.gpu
def test_a_step_that_cannot_be_replayed_runs_eagerly_and_says_why(gpu, body, reason):
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = body(eager_model, eager_opt)
    step = dg.capture_step(body(model, opt))
    for x, y in batches(5):
        assert step(x, y).item() == eager(x, y).item()
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert not step.replayable and reason in step.reason
    assert step.captures == 1


def dropout_model():
    dg.manual_seed(3)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 32),
                          nn.Dropout(0.5), nn.Linear(32, 5))
    return model, dg.optimizer_adam(model.parameters(), lr=1e-2)


@pytest.mark.gpu
def test_replayed_dropout_draws_a_new_mask_each_step_as_eager_steps_do(gpu):
    model, opt = dropout_model()
    eager_model, eager_opt = dropout_model()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    for n, (x, y) in enumerate(batches(8)):
        assert step(x, y).item() == eager(x, y).item(), n
        assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert step.replayable and step.replays == 6
    assert model.extra_state() == eager_model.extra_state()     # the dropout step counters


@pytest.mark.gpu
def test_bad_arguments_are_refused_before_anything_changes(gpu):
    with pytest.raises(ArgumentTypeError, match="'fn'"):
        dg.capture_step(5)
    with pytest.raises(InvalidValueError, match="'warmup'"):
        dg.capture_step(print, warmup=-1)
    model, opt, _ = make()
    step = dg.capture_step(step_fn(model, opt))
    data = batches(3)
    for x, y in data:
        step(x, y)
    with pytest.raises(ArgumentTypeError, match=r"'args\[0\]'"):
        step("pixels", data[0][1])
    with pytest.raises(ArgumentTypeError, match=r"'args\[1\]'"):
        step(data[0][0], dg.ag_tensor(data[0][1]))
    before = state(model, opt)
    bad = data[0][1].copy()
    bad[2] = 5                           # out of range for 5 classes
    with pytest.raises(InvalidValueError, match="'targets'"):
        step(data[0][0], bad)
    opt.lr = -1.0
    with pytest.raises(InvalidValueError, match="'lr'"):
        step(*data[0])
    assert_identical(state(model, opt), before)


@pytest.mark.gpu
def test_the_decorator_form_and_closing_free_the_recording(gpu):
    model, opt, _ = make()

    @dg.capture_step(warmup=2)
    def step(x, y):
        return step_fn(model, opt)(x, y)
    data = batches(4)
    for x, y in data[:2]:
        step(x, y)
    assert step.captures == 0
    for x, y in data[2:]:
        step(x, y)
    assert step.captures == 1 and step.replays == 1
    before = live_objects()["command_buffer"]
    step.close()
    assert live_objects()["command_buffer"] == before - 1


@pytest.mark.gpu
def test_a_step_recorded_in_eval_mode_is_recorded_anew_in_train_mode(gpu):
    model, opt = dropout_model()
    eager_model, eager_opt = dropout_model()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    model.eval()
    eager_model.eval()
    data = batches(6)
    for n, (x, y) in enumerate(data):
        if n == 3:
            model.train()
            eager_model.train()
        assert step(x, y).item() == eager(x, y).item(), n
        if n == 2:
            assert step.replayable
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert step.replayable and step.captures == 2


@pytest.mark.gpu
def test_turning_momentum_on_is_recorded_anew(gpu):
    def build():
        model, _, _ = make()
        return model, dg.optimizer_sgd(model.parameters(), lr=0.05)
    model, opt = build()
    eager_model, eager_opt = build()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    for n, (x, y) in enumerate(batches(7)):
        if n == 3:
            opt.momentum = eager_opt.momentum = 0.9
        assert step(x, y).item() == eager(x, y).item(), n
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    # Recorded at call 2, again at call 4 (the momentum buffers are made: state on a
    # first step, so it runs eagerly) and at call 5.
    assert step.replayable and step.captures == 3


@pytest.mark.gpu
def test_evaluation_between_replays_does_not_disturb_the_recorded_activations(gpu):
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = step_fn(eager_model, eager_opt)
    step = dg.capture_step(step_fn(model, opt))
    data = batches(6)
    for x, y in data:
        assert step(x, y).item() == eager(x, y).item()
        for m in (model, eager_model):
            with dg.no_grad():           # frees and refills the ordinary pass pool
                big = m(dg.ag_tensor(np.tile(x, (4, 1))))
            assert big.shape == (32, 5)
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert step.replays == 4


@pytest.mark.gpu
def test_a_step_that_raises_while_recorded_raises_and_is_recorded_later(gpu):
    model, opt, _ = make()
    eager_model, eager_opt, _ = make()
    eager = step_fn(eager_model, eager_opt)
    train = step_fn(model, opt)
    fail = [False, True]

    def fn(x, y):
        loss = train(x, y)
        if fail and fail.pop(0):
            raise ValueError("after the update")
        return loss
    step = dg.capture_step(fn)
    data = batches(5)
    for n, (x, y) in enumerate(data):
        want = eager(x, y).item()
        if n == 1:
            with pytest.raises(ValueError, match="after the update"):
                step(x, y)               # what was recorded ran, as it would have eagerly
        else:
            assert step(x, y).item() == want
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert step.replayable and (step.captures, step.replays) == (1, 2)


@pytest.mark.gpu
def test_a_step_dropped_while_another_is_recorded_is_freed_when_that_recording_ends(gpu):
    model, opt, _ = make()
    first = dg.capture_step(step_fn(model, opt))
    data = batches(4)
    for x, y in data[:3]:
        first(x, y)
    assert first.replayable
    recording = [r for r, _ in first._recordings.values()][0].recording
    other_model, other_opt, _ = make()
    train = step_fn(other_model, other_opt)
    closed_while_recording = []

    def fn(x, y):
        if second.calls == 2:            # while this call is recorded
            first.close()                # (as garbage collection may do)
            closed_while_recording.append(recording.closed)
        return train(x, y)
    second = dg.capture_step(fn)
    for x, y in data:
        second(x, y)
    assert second.replayable and second.replays == 2
    # The device could not be waited for during the recording: the first step's command
    # buffer and memory were freed once it had ended.
    assert closed_while_recording == [False]
    assert recording.closed and recording.cmd is None


@pytest.mark.gpu
def test_a_regression_with_layer_norm_replays_bit_for_bit(gpu):
    def build():
        dg.manual_seed(5)
        model = nn.Sequential(nn.Linear(13, 24), nn.LayerNorm(24), nn.GELU(), nn.Linear(24, 1))
        return model, dg.optimizer_adam(model.parameters(), lr=1e-2, weight_decay=0.01)

    def train(model, opt):
        def fn(x, y):
            with dg.with_grad_tape():
                loss = dg.mse_loss(model(dg.ag_tensor(x)), dg.ag_tensor(y))
                loss.backward()
            dg.clip_grad_norm(model.parameters(), 0.5)
            dg.clip_grad_value(model.parameters(), 0.05)
            opt.step()
            opt.zero_grad()
            return loss
        return fn
    model, opt = build()
    eager_model, eager_opt = build()
    eager = train(eager_model, eager_opt)
    step = dg.capture_step(train(model, opt))
    for n, (x, y) in enumerate(regression_batches(8)):
        assert step(x, y).item() == eager(x, y).item(), n
    assert_identical(state(model, opt), state(eager_model, eager_opt))
    assert step.replayable and step.replays == 6
