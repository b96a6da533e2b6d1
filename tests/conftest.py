"""Shared fixtures: the backend parameter, GPU availability, hypothesis profiles.

GPU tests skip when no Vulkan device exists, except under DUALGRAD_REQUIRE_GPU=1 (as CI runs
them), where a missing device fails the test instead: a GPU test never passes by not running.
"""
import collections
import itertools
import os
import pathlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import dualgrad as dg
from dualgrad.cpu import jit

# "quick" for the README's test command; "exhaustive" (CI) draws twice the cases (within CI's
# time: the Hypothesis tests are most of the suite's);
# "dev" draws new ones each run (not derandomized).
settings.register_profile("quick", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("exhaustive", max_examples=50, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))

REQUIRE_GPU = os.environ.get("DUALGRAD_REQUIRE_GPU") == "1"
ROOT = pathlib.Path(__file__).resolve().parents[1]


def child_env(*paths, **env) -> dict:
    """The environment for a fresh interpreter that imports this checkout: ``paths`` and the
    project's root in front of the inherited PYTHONPATH (kept, for packages installed there),
    plus ``env`` (a value of None unsets the variable)."""
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    merged = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (*map(str, paths), str(ROOT), *inherited) if p))
    for key, value in env.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def covering(**axes) -> tuple:
    """``(argnames, params)`` for ``pytest.mark.parametrize`` over the cross product of
    ``axes`` (argnames -> list of (id, value); a value is a tuple where the argnames name
    several). For tests whose every combination compiles a GPU pipeline of its own, which
    a software device (lavapipe) takes a second or more for: the default run takes a few
    combinations in which every value of every axis occurs at least once; the rest are
    marked ``exhaustive`` (CI runs them all)."""
    names = list(axes)
    combos = list(itertools.product(*(range(len(axes[n])) for n in names)))
    uncovered = {(a, i) for a, n in enumerate(names) for i in range(len(axes[n]))}
    quick, used = set(), collections.Counter()
    while uncovered:       # greedily: the combination covering most values yet, then the
        best = max(combos, key=lambda c: (      # one of the values least taken so far
            sum(v in uncovered for v in enumerate(c)), -sum(used[v] for v in enumerate(c))))
        quick.add(best)
        uncovered -= set(enumerate(best))
        used.update(enumerate(best))
    params = []
    for combo in combos:
        values, ids = [], []
        for name, i in zip(names, combo):
            ident, value = axes[name][i]
            values.extend(value if "," in name else (value,))
            ids.append(ident)
        marks = () if combo in quick else (pytest.mark.exhaustive,)
        params.append(pytest.param(*values, id="-".join(ids), marks=marks))
    return ",".join(names), params


def peak_during(fn) -> int:
    """The most device memory ``fn()`` had in use at once beyond what was in use before
    it (the previous tape's tensors freed first): ``tape_mem()["peak_bytes"]``'s rise."""
    with dg.with_grad_tape():
        pass
    dg.reset_peak_memory_stats()
    now = dg.tape_mem()
    fn()
    return dg.tape_mem()["peak_bytes"] - now["buffer_bytes"] - now["p_buffer_bytes"]


def loss_step(opt, loss_of):
    """fn(*batch): one training step: ``loss_of(*batch)`` under a tape, backward, optimizer
    step, gradients cleared; returns the loss."""
    def step(*batch):
        with dg.with_grad_tape():
            loss = loss_of(*batch)
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step


def train_step(model, opt, x, y):
    """One training step of a classifier (softmax cross-entropy); returns the loss."""
    return loss_step(opt, lambda x, y: dg.softmax_cross_entropy(model(dg.ag_tensor(x)),
                                                                  y))(x, y)


def assert_layer_step_replays(loss_of, features: int, seed: int) -> None:
    """A step training a Linear(features, features) with loss ``loss_of(h)`` of its output,
    captured, returns what the eager step returns batch after batch, and replays."""
    def build():
        dg.manual_seed(seed)
        return dg.nn.Linear(features, features)

    def step(layer):
        def run(x):
            with dg.with_grad_tape():
                loss = loss_of(layer(dg.ag_tensor(x)))
                loss.backward()
            layer.zero_grad()
            return loss
        return run
    eager, captured = step(build()), dg.capture_step(step(build()))
    for k in range(4):
        x = np.random.default_rng(k).standard_normal((5, features)).astype(np.float32)
        assert captured(x).item() == eager(x).item()
    assert captured.replays >= 1 and captured.reason == ""


def require_gpu():
    """Skip (or, under DUALGRAD_REQUIRE_GPU=1, fail) when there is no Vulkan device."""
    found, reason = dg.api.device.gpu_status()
    if not found:
        if REQUIRE_GPU:
            pytest.fail(f"DUALGRAD_REQUIRE_GPU=1 but no Vulkan device: {reason}")
        pytest.skip(f"no Vulkan device ({reason})")


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    """Run the test on each backend; the backend is selected for the test's duration."""
    if request.param == "gpu":
        require_gpu()
    dg.ag_device(request.param)
    try:
        yield request.param
    finally:
        dg.ag_device("cpu")


@pytest.fixture
def gpu():
    """Run the test on the gpu backend only."""
    require_gpu()
    dg.ag_device("gpu")
    try:
        yield "gpu"
    finally:
        dg.ag_device("cpu")


@pytest.fixture(scope="session", autouse=True)
def _own_pipeline_cache(tmp_path_factory):
    """The suite keeps its compiled pipelines in a directory of its own, not the user's
    cache (the device is opened after this, on the first gpu test); the cpu kernels Numba
    compiles stay in the user's cache, where a run finds them already compiled."""
    if "DUALGRAD_CACHE_DIR" not in os.environ:
        if jit.CACHE_DIR and "NUMBA_CACHE_DIR" not in os.environ:
            os.environ["NUMBA_CACHE_DIR"] = jit.CACHE_DIR       # (the sources' own)
        os.environ["DUALGRAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("pipeline-cache"))
    yield


# Bools are a byte each: only these shaders read or write them (the others move 32-bit
# words, four bools at once); where.comp only as its condition, its first operand.
BYTE_SHADERS = {"logic": None, "convert": None, "where": 0}


def bool_checked(launch):
    """Device.launch refusing bool storage where a shader would read it as words."""
    def checked(self, shader, spec, push, groups, reads, writes):
        for k, h in enumerate((*reads, *writes)):
            if h is not None and h.dtype == np.bool_ and (
                    shader not in BYTE_SHADERS or BYTE_SHADERS[shader] not in (None, k)):
                raise AssertionError(f"{shader}.comp was given bool storage (operand {k}); "
                                     "it reads 32-bit words (gpu/backend.py's _words)")
        return launch(self, shader, spec, push, groups, reads, writes)
    return checked


@pytest.fixture(scope="session", autouse=True)
def _bools_reach_only_byte_kernels():
    """Throughout the suite, a bool tensor given to a kernel that moves words fails."""
    from dualgrad.gpu.device import Device
    launch = Device.launch
    Device.launch = bool_checked(launch)
    yield
    Device.launch = launch


@pytest.fixture(autouse=True)
def _cpu_between_tests():
    """Every test starts on cpu with a seeded generator."""
    dg.ag_device("cpu")
    dg.manual_seed(1234)
    yield
    dg.ag_device("cpu")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
