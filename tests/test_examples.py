"""The examples in examples/ train on both backends (short runs), and each model trains in
lockstep on the cpu and the gpu for 50 steps within the bound written down here."""
import importlib.util

import numpy as np
import pytest

import dualgrad as dg
from conftest import ROOT, loss_step
from dualgrad.testing.lockstep import lockstep


def example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cnn, gpt = example("cnn"), example("gpt")


def test_the_cnn_example_trains_and_reports_its_accuracy(device):
    lines = []
    result = cnn.train(device, steps=12, batch=16, train_size=256, test_size=64,
                       channels=(4, 8), report_every=4, out=lines.append)
    losses = result["losses"]
    assert len(losses) == 12 and np.mean(losses[-4:]) < losses[0]
    assert 0.0 <= result["accuracy"] <= 1.0
    assert lines[-1].startswith("held-out accuracy") and len(lines) == 4


@pytest.mark.gpu
def test_a_captured_gpt_step_replays_as_eager_steps(gpu):
    # the embedding's gradient groups the positions on the device: the step replays
    chars = gpt.Characters(dg.texts.load())

    def make():
        dg.manual_seed(6)
        model = gpt.GPT(len(chars.chars), 16, 32, 1, 2)
        return model, dg.optim.AdamW(model.parameters(), lr=3e-3)

    def step_of(model, opt):
        return loss_step(opt, lambda x, y: gpt.loss_of(model, x, y))
    (m1, o1), (m2, o2) = make(), make()
    eager, captured = step_of(m1, o1), dg.capture_step(step_of(m2, o2))
    rng = np.random.default_rng(0)
    for k in range(4):
        x, y = chars.batch(rng, 4, 16)
        assert captured(x, y).item() == eager(x, y).item(), k
    assert captured.replays >= 1 and captured.reason == ""


def test_the_gpt_example_trains_and_samples(device):
    lines = []
    result = gpt.train(device, steps=8, batch=4, context=16, dim=32, layers=1, heads=2,
                       report_every=4, sample_length=20, out=lines.append)
    assert np.mean(result["losses"][-4:]) < result["losses"][0]
    text = result["sample"]
    assert text.startswith("The keeper ") and len(text) == len("The keeper ") + 20
    assert set(text) <= set(dg.texts.load())
    assert lines[-1] == "sample:\n" + text


# Lockstep: normwise relative divergence of every parameter, buffer and optimizer state
# entry (dualgrad.testing.lockstep). Each step's kernels agree to a few float32 ULPs (the
# tolerance table); 50 steps of Adam carry those differences forward. Measured on lavapipe:
# at most 1.0e-6 (CNN) and 8e-7 (GPT) over the 50 steps. The bound 1e-4 is the harness's
# default: a factor of 100 for other devices' rounding, and still far below what a wrong
# kernel does (it moves weights by a fraction of an update, lr * 1e-2, in a step or two).
# Neither model has a parameter whose gradient is zero but for rounding (a convolution's
# bias under batch norm, an attention key's bias): Adam scales such noise up to full
# updates, different on each backend (see the examples' comments).
LOCKSTEP_BOUND = 1e-4


@pytest.mark.gpu
def test_the_cnn_trains_in_lockstep_on_both_backends(gpu):
    x, y = cnn.make_digit_images(50 * 8, seed=3)
    batches = [(x[k:k + 8], y[k:k + 8]) for k in range(0, len(x), 8)]
    result = lockstep(lambda: cnn.build((4, 8)),
                      lambda p: dg.optimizer_adam(p, lr=3e-3), batches,
                      tolerance=LOCKSTEP_BOUND)
    assert result.ok, (result.diverged_at, result.tensor)
    assert len(result.steps) == 51
    assert any(name.endswith("running_mean") for name in result.steps[-1].tensors)


@pytest.mark.gpu
def test_the_gpt_trains_in_lockstep_on_both_backends(gpu):
    chars = gpt.Characters(dg.texts.load())
    rng = np.random.default_rng(4)
    batches = [chars.batch(rng, 4, 16) for _ in range(50)]
    result = lockstep(lambda: gpt.GPT(len(chars.chars), 16, 32, 1, 2),
                      lambda p: dg.optim.AdamW(p, lr=3e-3), batches,
                      loss_fn=gpt.loss_of, tolerance=LOCKSTEP_BOUND)
    assert result.ok, (result.diverged_at, result.tensor)
    assert len(result.steps) == 51
