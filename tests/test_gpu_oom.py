"""Device memory exhaustion: a budget (DUALGRAD_GPU_MEMORY_LIMIT) or the driver refusing a
block raises DeviceOutOfMemory naming the request and the pools, with nothing changed:
resident weights stay intact, training continues once memory is freed, and releasing the
device still rescues every weight."""
import gc
import math

import numpy as np
import pytest
import vulkan

import dualgrad as dg
from dualgrad.api.device import active
from dualgrad.gpu import context, memory
from dualgrad.gpu.dispatch import MAX_ELEMENTS
from dualgrad.gpu.memory import LIMIT_ENV, MIB, parse_limit

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("text, expected", [("4096", 4096), ("64K", 64 << 10),
                                            ("3m", 3 << 20), (" 2 G ", 2 << 30),
                                            ("", None), (None, None)])
def test_limit_syntax(text, expected):
    assert parse_limit(text) == expected


@pytest.mark.parametrize("text", ["abc", "-1", "1.5G", "0", "12T", "1e9", "5 MB"])
def test_a_bad_limit_names_the_variable_and_changes_nothing(monkeypatch, text):
    with pytest.raises(dg.InvalidValueError, match=rf"^environment variable {LIMIT_ENV} is"):
        parse_limit(text)
    monkeypatch.setenv(LIMIT_ENV, text)
    with pytest.raises(dg.InvalidValueError, match=LIMIT_ENV):
        dg.ag_device("gpu")
    assert dg.ag_device() == "cpu"


def make_model(seed):
    dg.manual_seed(seed)
    model = dg.nn.Sequential(dg.nn.Linear(16, 32), dg.nn.ReLU(), dg.nn.Linear(32, 4))
    return model, dg.optimizer_adam(model.parameters(), lr=1e-2)


def train(model, opt, steps, start=0):
    for step in range(start, start + steps):
        rng = np.random.default_rng(step)
        x, y = rng.standard_normal((8, 16)).astype(np.float32), rng.integers(0, 4, 8)
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x)), y)
            loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item()


def weights(model):
    return [p.numpy() for p in model.parameters()]


def assert_same(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.tobytes() == e.tobytes()


def outer_sum(n):
    """An n x n pass tensor from two tiny host arrays: a large request at little host cost."""
    return dg.add(np.zeros((n, 1), np.float32), np.zeros((1, n), np.float32))


@pytest.fixture
def budget_gpu(monkeypatch, gpu):
    """The gpu backend reopened under an 8 MiB budget (1 MiB blocks)."""
    dg.ag_device("cpu")
    monkeypatch.setenv(LIMIT_ENV, "8M")
    dg.ag_device("gpu")
    assert active().device.budget.limit == 8 * MIB
    return active()


def test_the_budget_refuses_then_training_continues_after_freeing(budget_gpu):
    model, opt = make_model(0)
    reference, ref_opt = make_model(0)
    train(model, opt, 2)
    kept = weights(model)
    # a pass request larger than the whole budget
    with pytest.raises(dg.DeviceOutOfMemory) as info:
        outer_sum(2048)                              # 16 MiB
    message = str(info.value)
    assert isinstance(info.value, MemoryError)
    assert "a 16777216-byte pass allocation" in message
    assert "pass pool" in message and "persistent pool" in message
    assert f"{LIMIT_ENV}=8388608 bytes" in message
    # fill the budget with persistent tensors until it refuses
    hogs = []
    with pytest.raises(dg.DeviceOutOfMemory, match="persistent allocation"):
        for _ in range(16):
            hogs.append(dg.ag_param(np.ones(MIB // 4, np.float32)))
    assert 3 <= len(hogs) < 8
    assert_same(weights(model), kept)                 # resident weights are intact
    with pytest.raises(dg.DeviceOutOfMemory):
        outer_sum(1024)                               # 4 MiB of activations: no room yet
    del hogs
    gc.collect()
    assert outer_sum(1024).numpy().shape == (1024, 1024)   # empty blocks were given back
    train(model, opt, 2, start=2)
    train(reference, ref_opt, 4)                      # the same run, never refused
    assert_same(weights(model), weights(reference))
    trained = weights(model)
    dg.ag_device("cpu")                               # the rescue still works
    assert_same(weights(model), trained)
    assert all(p.ptr is None for p in model.parameters())


def test_a_driver_refusal_is_device_out_of_memory(gpu):
    # A pass allocation of twice the device's memory, asked of the pool itself (a tensor
    # that large would be refused sooner, as TensorTooLarge): the driver refuses the block
    # (lavapipe refuses any buffer of 4 GiB or more).
    ctx = active().ctx
    heaps = ctx.memory_properties
    total = sum(heaps.memoryHeaps[i].size for i in range(heaps.memoryHeapCount))
    nbytes = max(4 << 30, 2 * total)
    model, opt = make_model(1)
    train(model, opt, 1)
    kept, objects = weights(model), context.live_objects()
    with pytest.raises(dg.DeviceOutOfMemory) as info:
        active().device.pass_pool.alloc(nbytes)
    message = str(info.value)
    need = -(-nbytes // memory.ALIGN) * memory.ALIGN       # the pools' allocation unit
    assert f"a {need}-byte pass allocation" in message
    assert "the driver refused" in message and "no limit" in message
    assert context.live_objects() == objects          # nothing half-made is left behind
    assert_same(weights(model), kept)
    assert np.isfinite(train(model, opt, 2, start=1))
    trained = weights(model)
    dg.ag_device("cpu")
    assert_same(weights(model), trained)


def test_a_tensor_past_the_kernels_index_is_refused_before_memory_is_asked_for(gpu):
    # 2**31 elements and more: the kernels' 32-bit indices cannot reach them, so the
    # request fails with TensorTooLarge (a DeviceOutOfMemory) and the driver is not asked.
    model, opt = make_model(4)
    train(model, opt, 1)
    kept, objects = weights(model), context.live_objects()
    reserved = active().device.pass_pool.reserved_bytes
    n = math.isqrt(MAX_ELEMENTS) + 1
    with pytest.raises(dg.TensorTooLarge, match=rf"shape \({n}, {n}\) has {n * n} elements"
                       rf".* at most {MAX_ELEMENTS} \(2\*\*31 - 1\)"):
        outer_sum(n)
    with pytest.raises(dg.DeviceOutOfMemory, match=f"{MAX_ELEMENTS + 1} elements"):
        active().empty((MAX_ELEMENTS + 1,))
    assert active().empty((0, MAX_ELEMENTS + 1)).size == 0
    assert context.live_objects() == objects
    assert active().device.pass_pool.reserved_bytes == reserved
    assert_same(weights(model), kept)
    assert np.isfinite(train(model, opt, 1, start=1))


def test_an_allocate_memory_failure_is_retried_once_then_raised(gpu, monkeypatch):
    # VK_ERROR_OUT_OF_DEVICE_MEMORY from vkAllocateMemory, injected at the binding: the pools
    # give back the blocks that hold nothing live and retry once, then raise; when the
    # driver recovers, allocation works again.
    model, opt = make_model(2)
    train(model, opt, 1)
    kept = weights(model)
    persistent = active().device.persistent_pool
    reserved = persistent.reserved_bytes
    hog = dg.ag_param(np.ones(64 * MIB // 4, np.float32))     # a block of its own
    assert persistent.reserved_bytes > reserved
    del hog
    gc.collect()
    calls = []

    def refuse(*args, **kwargs):
        calls.append(1)
        raise vulkan.VkErrorOutOfDeviceMemory()

    monkeypatch.setattr(vulkan, "vkAllocateMemory", refuse)
    with pytest.raises(dg.DeviceOutOfMemory, match=r"the driver refused a \d+-byte block"):
        outer_sum(8192)                               # 256 MiB: more than a block
    assert len(calls) == 2                            # refused, reclaimed, refused again
    assert persistent.reserved_bytes == reserved      # the empty block was given back
    monkeypatch.undo()
    assert_same(weights(model), kept)
    assert outer_sum(8192).numpy().shape == (8192, 8192)
    assert np.isfinite(train(model, opt, 1, start=1))


def _refused_step(model, rows):
    try:
        with dg.with_grad_tape():
            dg.sum(model(dg.ag_tensor(np.ones((rows, 256), np.float32)))).backward()
    except dg.DeviceOutOfMemory:
        return True
    return False


def test_a_step_refused_for_memory_gives_back_its_batch_and_activations(budget_gpu):
    """A step that fails for want of memory frees what it made (its activations and the
    batch it uploaded) once the exception is handled: as much fits afterwards as before."""
    model = dg.nn.Sequential(dg.nn.Linear(256, 1024), dg.nn.ReLU(), dg.nn.Linear(1024, 4))
    fresh = dg.tape_mem()
    assert _refused_step(model, 2048)       # 2048 x 1024 activations: 8 MiB, past the budget
    gc.collect()
    after = dg.tape_mem()
    assert after["buffer_bytes"] == fresh["buffer_bytes"]
    assert after["p_buffer_bytes"] == fresh["p_buffer_bytes"]
    # the largest pass tensor that fit before the step still fits, and training goes on
    assert outer_sum(1024).numpy().shape == (1024, 1024)
    assert not _refused_step(model, 64)
