"""Soak: thousands of training steps on the gpu backend with flat device memory, flat
Vulkan object counts and flat process memory. Prints its start and end figures (run pytest
with -s to see them)."""
import numpy as np
import pytest

import dualgrad as dg
from dualgrad.gpu import context

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
WARMUP, STEPS = 200, 3000
RSS_ALLOWANCE = 8 << 20          # bytes: allocator noise, not growth per step


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def figures() -> dict:
    return {"rss": rss_bytes(), **dg.tape_mem(), **context.live_objects()}


def test_thousands_of_steps_keep_memory_and_objects_flat(gpu):
    dg.manual_seed(0)
    rng = np.random.default_rng(0)
    model = dg.nn.Sequential(dg.nn.Linear(32, 64), dg.nn.LayerNorm(64), dg.nn.GELU(),
                             dg.nn.Dropout(0.1), dg.nn.Linear(64, 10))
    opt = dg.optimizer_adamw(model.parameters(), lr=1e-3)
    sched = dg.optim.CosineAnnealingLR(opt, T_max=STEPS)
    x = rng.standard_normal((256, 32)).astype(np.float32)
    y = rng.integers(0, 10, 256)
    losses = []
    for step in range(STEPS):
        if step == WARMUP:
            start = figures()
        idx = rng.integers(0, 256, 32)
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x[idx])), y[idx])
            loss.backward()
        dg.clip_grad_norm(model.parameters(), 5.0)
        opt.step()
        opt.zero_grad()
        sched.step()
        if step % 100 == 0:
            losses.append(loss.item())          # a read, as a training loop does now and then
    end = figures()
    print(f"\nsoak: {STEPS} steps after {WARMUP} warm-up; start -> end")
    for key in start:
        print(f"  {key}: {start[key]} -> {end[key]}")
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    rss = end.pop("rss") - start.pop("rss")
    assert rss <= RSS_ALLOWANCE, f"process memory grew by {rss} bytes"
    assert end == start                        # pools and Vulkan objects: exactly flat
