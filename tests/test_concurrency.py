"""Threads training separate models on the gpu backend at the same time: each thread has
its own pass arena, so a tape opened in one thread never frees another thread's live
activations, and each model ends exactly where the same training run alone ends."""
import threading

import numpy as np
import pytest

import dualgrad as dg
from dualgrad.api.device import active

pytestmark = pytest.mark.gpu
STEPS = 6


def build(seed, hidden):
    dg.manual_seed(seed)
    model = dg.nn.Sequential(dg.nn.Linear(10, hidden), dg.nn.GELU(), dg.nn.Dropout(0.2),
                             dg.nn.Linear(hidden, 3))
    return model, dg.optimizer_adam(model.parameters(), lr=1e-2)


def train(model, opt, seed, meet=lambda: None):
    """STEPS steps on data drawn from ``seed``; ``meet`` is called mid-forward, with the
    step's activations live. Returns the losses read back each step."""
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(STEPS):
        x = rng.standard_normal((16, 10)).astype(np.float32)
        y = rng.integers(0, 3, 16)
        with dg.with_grad_tape():
            hidden = model[1](model[0](dg.ag_tensor(x)))
            meet()
            logits = model[3](model[2](hidden))
            loss = dg.softmax_cross_entropy(logits, y)
            loss.backward()
            meet()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()]


def test_two_threads_train_as_each_would_alone(gpu):
    specs = [(11, 24), (22, 40)]
    alone = [train(*build(seed, hidden), seed) for seed, hidden in specs]
    models = [build(seed, hidden) for seed, hidden in specs]     # built here: same draws
    barrier = threading.Barrier(len(specs), timeout=60)
    results, errors = [None] * len(specs), []

    def work(i):
        try:
            results[i] = train(*models[i], specs[i][0], meet=barrier.wait)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(specs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, repr(errors[0])
    for (losses, params), (ref_losses, ref_params) in zip(results, alone):
        assert losses == ref_losses
        for got, expected in zip(params, ref_params):
            assert got.tobytes() == expected.tobytes()


def test_each_thread_has_its_own_pass_arena_and_a_dead_threads_is_reused(gpu):
    backend = active()
    mine = backend.device.pass_pool
    seen = []

    def grab():
        seen.append(backend.device.pass_pool)
        dg.ag_tensor(np.ones(4)).numpy()

    first = threading.Thread(target=grab)
    first.start()
    first.join()
    second = threading.Thread(target=grab)
    second.start()
    second.join()
    assert seen[0] is not mine
    assert seen[1] is seen[0]                # the finished thread's arena was handed on
    assert backend.device.pass_pool is mine
