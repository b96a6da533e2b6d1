"""The Vulkan runtime: transfers in a steady step, pools, dead tensors, device choice,
compiled shaders, threads."""
import json
import os
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dualgrad as dg
from conftest import child_env, require_gpu, train_step
from dualgrad import kernel_ops
from dualgrad.api import device
from dualgrad.gpu import dispatch, plans, workspace
from dualgrad.gpu.kernels import elementwise, matmul
from dualgrad.gpu.kernels import optim as gpu_optim
from dualgrad.gpu.kernels.reduce import SUM, reduce_recipe
from dualgrad.gpu.shader_sources import SHADERS, SPIRV, source_hash
from dualgrad.gpu.workspace import SCRATCH

ROOT = SHADERS.parent


def mlp():
    return dg.nn.Sequential(dg.nn.Linear(12, 32), dg.nn.ReLU(), dg.nn.Linear(32, 5))


@pytest.mark.gpu
def test_steady_step_uploads_only_the_batch_and_downloads_nothing(gpu, rng):
    model = mlp()
    opt = dg.optimizer_adam(model.parameters(), lr=1e-3)
    x = rng.standard_normal((16, 12)).astype(np.float32)
    y = rng.integers(0, 5, 16)
    for _ in range(2):                       # optimizer state now exists
        train_step(model, opt, x, y)
    dg.reset_transfer_stats()
    loss = train_step(model, opt, x, y)
    stats = dg.transfer_stats()
    assert stats["h2d_bytes"] == x.nbytes + 16 * 4     # the batch and its int32 targets
    assert stats["h2d_calls"] == 2
    assert stats["d2h_bytes"] == 0 and stats["d2h_calls"] == 0
    value = loss.item()                       # reading the loss is the only download
    stats = dg.transfer_stats()
    assert stats["d2h_bytes"] == 4 and stats["d2h_calls"] == 1
    assert np.isfinite(value)


@pytest.mark.gpu
def test_steps_are_batched_into_few_submits(gpu, rng):
    model = mlp()
    opt = dg.optimizer_adam(model.parameters(), lr=1e-3)
    x, y = rng.standard_normal((16, 12)).astype(np.float32), rng.integers(0, 5, 16)
    train_step(model, opt, x, y)
    dg.reset_transfer_stats()
    for _ in range(5):
        train_step(model, opt, x, y)
    # about 30 dispatches a step; without batching each would be a submit
    assert dg.transfer_stats()["submits"] <= 5


MANY = [(i * 128, i * 128 + 64) for i in range(40)]       # more than MAX_TRACKED ranges


@pytest.mark.gpu
@pytest.mark.parametrize("first,then,barrier", [
    (([], [(0, 64)]), ([(64, 128)], [(128, 192)]), False),    # disjoint
    (([], [(0, 64)]), ([(32, 40)], [(128, 192)]), True),      # read after write
    (([(0, 64)], [(256, 320)]), ([], [(60, 70)]), True),      # write after read
    (([], [(0, 64)]), ([], [(63, 64)]), True),                # write after write
    (([(0, 64)], [(256, 320)]), ([(0, 64)], [(512, 576)]), False),    # read after read
    (([], [(0, 64), (512, 576)]), ([(64, 512)], [(1024, 1088)]), False),  # between writes
    (([(0, 64), (512, 576)], []), ([], [(64, 512)]), False),  # ... and between reads
    (([], MANY), ([(64, 128)], []), True),        # a command of many ranges is noted as
    (([], MANY), ([(40 * 128, 40 * 128 + 64)], []), False),   # their span, so its gaps count
], ids=["disjoint", "raw", "war", "waw", "rar", "between-writes", "between-reads",
        "in-a-span", "past-a-span"])
def test_a_barrier_comes_only_before_a_command_with_a_hazard(gpu, first, then, barrier):
    # Recorded into a capture that never runs, so the ranges need not be real memory.
    be = device.active()
    rec, pipeline = be.device.rec, be.device.pipelines.get("unary", (0, 0))
    push = bytes(48)
    with be.ctx.lock:
        rec.begin_capture()
        try:
            rec.dispatch(pipeline, push, (1, 1, 1), *first)
            before = rec.counters.barriers
            rec.dispatch(pipeline, push, (1, 1, 1), *then)
            made = rec.counters.barriers - before
        finally:
            cmd = rec.end_capture()
    rec.free_captured(cmd)
    assert made == int(barrier)


def test_recipes_carry_their_uints_packed_as_the_tail_of_their_push_constants():
    """The hot dispatches pack only their addresses and append the recipe's packed uints:
    the same bytes as packing all the push constants the shader declares."""
    addrs = (0x10000, 0x20100, 0x30200, 0x40300, 0x50400)
    passes = (reduce_recipe(SUM, (64, 8192), (1,), plans.reduce_plan) +
              reduce_recipe(SUM, (3, 4, 5), (0, 2), plans.reduce_plan))
    products = [matmul.matmul_recipe((256, 784), (1024, 784), False, True, (256, 1024, 784, 1),
                                     (48 << 10, 1024, False), plans.matmul_plan),
                matmul.matmul_recipe((1024, 1024), (1024, 1024), False, False,
                                     (1024, 1024, 1024, 1), (48 << 10, 1024, True),
                                     plans.matmul_plan)]
    assert products[0].partials is not None and products[1].split        # split K; tensor
    for recipe in (*passes, *products):
        assert (dispatch.packer(5).pack(*addrs) + recipe.tail ==
                dispatch.push_constants(addrs, recipe.uints))
    split = products[1].split
    assert (dispatch.packer(4).pack(*addrs[:4]) + split.tail ==
            dispatch.push_constants(addrs[:4], split.uints))
    # a (4, 1, 3) + b (5, 3): one piece of 60 outputs of 4-D shape (1, 4, 5, 3), then each
    # operand's element strides along those axes (0 where it is broadcast)
    shape, parts, flat = elementwise.broadcast_layout(((4, 1, 3), (5, 3)), None)
    assert (shape, flat) == ((4, 5, 3), 0)
    (tail, n, offsets), = parts
    assert (n, offsets) == (60, (0, 0, 0))
    assert tail == dispatch.packed_uints((60, 1, 4, 5, 3, 0, 3, 0, 1, 0, 0, 3, 1))


def test_grids_cover_the_work_within_the_workgroup_limit():
    wg, cap = dispatch.WG, dispatch.MAX_GROUPS
    for n in (0, 1, wg - 1, wg, wg + 1, 4 * wg + 1, cap * wg, cap * wg + 1, 1 << 34):
        assert dispatch.grid(n) == (max(1, min(-(-n // wg), cap)), 1, 1)
        assert dispatch.quad_grid(n) == (max(1, min(-(-(-(-n // 4)) // wg), cap)), 1, 1)


class FenceStatus:
    """The recorder's function table with vkGetFenceStatus answering ``answer`` (None: the
    driver's answer) and the calls of it and of vkWaitForFences counted."""

    def __init__(self, lib, answer=None):
        self._lib, self.answer = lib, answer
        self.polls = self.sleeps = 0

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def vkGetFenceStatus(self, device, fence):
        self.polls += 1
        real = self._lib.vkGetFenceStatus(device, fence)
        return real if self.answer is None else self.answer

    def vkWaitForFences(self, *args):
        self.sleeps += 1
        return self._lib.vkWaitForFences(*args)


def chained_products(be, rng, n=8):
    """``n`` products, each of the one before, recorded (not waited for): the device array
    and the host's float64 result."""
    a = (rng.standard_normal((96, 96)) / 10).astype(np.float32)
    h, want = be.upload(a), a.astype(np.float64)
    for _ in range(n):
        h, want = be.matmul(h, be.upload(a)), want @ a
    return h, want


@pytest.mark.gpu
@pytest.mark.parametrize("poll", [0.0, 10.0], ids=["sleeps", "polls"])
def test_a_wait_returns_once_the_work_is_done_polling_or_sleeping(gpu, rng, monkeypatch,
                                                                   poll):
    from dualgrad.gpu import recorder
    be = device.active()
    monkeypatch.setattr(recorder, "WAIT_POLL_SECONDS", poll)
    table = FenceStatus(be.device.rec.lib)
    monkeypatch.setattr(be.device.rec, "lib", table)
    h, want = chained_products(be, rng)
    np.testing.assert_allclose(be.download(h), want, rtol=1e-4, atol=1e-5)
    assert table.polls >= 1
    if poll:                       # the work takes far less than 10 s: never slept
        assert table.sleeps == 0


@pytest.mark.gpu
def test_a_wait_sleeps_once_its_polling_time_is_up(gpu, rng, monkeypatch):
    # The fence reads as not ready however often it is asked: the wait polls for its
    # time, then sleeps until the device signals it.
    from dualgrad.gpu import recorder
    be = device.active()
    monkeypatch.setattr(recorder, "WAIT_POLL_SECONDS", 0.02)
    table = FenceStatus(be.device.rec.lib, be.device.rec.vk.VK_NOT_READY)
    monkeypatch.setattr(be.device.rec, "lib", table)
    h, want = chained_products(be, rng)
    np.testing.assert_allclose(be.download(h), want, rtol=1e-4, atol=1e-5)
    assert table.sleeps >= 1 and table.polls > 1


@pytest.mark.gpu
def test_a_lost_device_in_a_wait_is_a_device_error(gpu, rng, monkeypatch):
    be = device.active()
    h, _ = chained_products(be, rng, 2)
    table = FenceStatus(be.device.rec.lib, be.device.rec.vk.VK_ERROR_DEVICE_LOST)
    monkeypatch.setattr(be.device.rec, "lib", table)
    with pytest.raises(dg.DeviceError, match="device may have been lost"):
        be.download(h)
    monkeypatch.undo()
    be.download(h)                 # (the device was not lost: later waits go on)


@pytest.mark.gpu
def test_independent_finishing_reductions_need_no_barrier(gpu, rng):
    """Each reduction that finishes in its own dispatch takes its counters and partial
    results from the next range of the workspace, so independent ones recorded back to
    back get no barrier between them."""
    be = device.active()
    h = be.upload(rng.standard_normal((64, 8192)).astype(np.float32))
    assert [p.finish for p in reduce_recipe(SUM, (64, 8192), (1,), plans.reduce_plan)] == [True]
    first = be.reduce("sum", h, (1,))
    before = be.device.rec.counters.barriers
    outs = [be.reduce("sum", h, (1,)) for _ in range(4)]
    assert be.device.rec.counters.barriers == before
    for out in outs:
        assert np.array_equal(be.download(out), be.download(first))


@pytest.mark.exhaustive
@pytest.mark.gpu
def test_workspace_ranges_used_again_give_the_same_results(gpu, rng, monkeypatch):
    """Past the end of the workspace its ranges are used again: a barrier orders each
    reuse after the last (the counters are back at zero by then), so many reductions in a
    row, of two inputs in turn, each give the bits of the first of its kind. (In a
    workspace made small for the test, so that it wraps in a few calls.)"""
    be = device.active()
    scratch = 1 << 16
    monkeypatch.setattr(workspace, "SCRATCH", scratch)
    monkeypatch.setattr(be.device.workspace, "arrays", None)
    monkeypatch.setattr(be.device.workspace, "cursors", [0, 0, 0])
    xs = [rng.standard_normal((512, 4096)).astype(np.float32) for _ in range(2)]
    hs = [be.upload(x) for x in xs]
    (only,) = reduce_recipe(SUM, (512, 4096), (1,), plans.reduce_plan)
    calls = 2 * scratch // (only.partials[0] * only.partials[1]) + 3    # wraps twice
    outs = [be.reduce("sum", hs[i % 2], (1,)) for i in range(calls)]
    want = [be.download(outs[0]), be.download(outs[1])]
    for i, out in enumerate(outs):
        assert np.array_equal(be.download(out), want[i % 2]), i
    for x, got in zip(xs, want):
        np.testing.assert_allclose(got, x.sum(axis=1, dtype=np.float64), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_split_k_products_keep_their_partial_results_in_the_workspace(gpu, rng):
    """A split-K product's partial results, as a finishing reduction's, go in the next
    range of the workspace: products recorded back to back allocate nothing but their
    outputs and get no barrier between them (nothing they name to the recorder is shared),
    and each gives the bits of the first."""
    be = device.active()
    a = be.upload(rng.standard_normal((8, 2048)).astype(np.float32))
    b = be.upload(rng.standard_normal((2048, 16)).astype(np.float32))
    assert plans.matmul_plan(8, 16, 2048, 1).splits > 1
    first = be.matmul(a, b)
    barriers, buffers = be.device.rec.counters.barriers, be.memory()["n_buffers"]
    outs = [be.matmul(a, b) for _ in range(4)]
    assert be.device.rec.counters.barriers == barriers
    assert be.memory()["n_buffers"] == buffers + len(outs)
    for out in outs:
        assert np.array_equal(be.download(out), be.download(first))


@pytest.mark.gpu
def test_big_partial_results_go_in_a_range_made_at_first_need(gpu, rng, monkeypatch):
    """Partial results past SCRATCH go in the workspace's big range, made by the first
    product that needs it; where the budget has no room for that range, they are allocated
    each their own, with the same bits."""
    be = device.active()
    a = be.upload(rng.standard_normal((32, 1024)).astype(np.float32))
    b = be.upload(rng.standard_normal((1024, 4096)).astype(np.float32))
    recipe = matmul.matmul_recipe(a.shape, b.shape, False, False, (32, 4096, 1024, 1),
                                  be.device.matmul_limits, plans.matmul_plan)
    space = be.device.workspace
    assert SCRATCH < np.prod(recipe.partials) <= workspace.BIG_SCRATCH // 2
    monkeypatch.setattr(space, "big", None)
    monkeypatch.setattr(space, "cursors", [0, 0, 0])
    first = be.matmul(a, b)
    assert space.big.size == workspace.BIG_SCRATCH and space.cursors[2] > 0
    buffers = be.memory()["n_buffers"]
    again = be.matmul(a, b)
    assert be.memory()["n_buffers"] == buffers + 1          # its output alone
    monkeypatch.setattr(space, "big", None)
    pool = be.device.persistent_pool

    def no_room(nbytes):
        raise dg.DeviceOutOfMemory("no room under the budget")
    monkeypatch.setattr(pool, "alloc", no_room)
    be.reset_peak_memory()
    before = be.memory()
    alone = be.matmul(a, b)
    assert space.big is False
    after = be.memory()                     # its partials, in the pass pool, went with it
    assert after["n_buffers"] == buffers + 2 and after["peak_bytes"] >= before["peak_bytes"] \
        + alone.nbytes + 4 * int(np.prod(recipe.partials))
    for out in (again, alone):
        assert np.array_equal(be.download(out), be.download(first))


@pytest.mark.gpu
def test_a_workspace_range_used_again_comes_after_a_barrier(gpu, rng):
    """The recorder does not track the workspace's ranges: where they start again from the
    first, the backend puts a barrier before the dispatch that reuses one (and only
    there)."""
    be = device.active()
    h = be.upload(rng.standard_normal((64, 8192)).astype(np.float32))
    first = be.reduce("sum", h, (1,))            # (after the upload's barrier)
    before = be.device.rec.counters.barriers
    be.reduce("sum", h, (1,))
    assert be.device.rec.counters.barriers == before
    be.device.workspace.cursors[1] = SCRATCH - 1     # the next partial results wrap around
    again = be.reduce("sum", h, (1,))
    assert be.device.rec.counters.barriers == before + 1
    assert be.device.workspace.cursors[1] < SCRATCH // 2
    assert np.array_equal(be.download(again), be.download(first))


@pytest.mark.gpu
def test_workspace_ranges_are_taken_under_the_device_lock(gpu, rng, monkeypatch):
    """No barrier orders two dispatches that share a workspace range unless they follow
    a wrap, so a range is taken, and its dispatch recorded, under the device lock: another
    thread cannot take the same one in between."""
    be = device.active()
    held = []
    space = be.device.workspace
    taken = type(space).take

    def checked(self, which, n):
        held.append(self.device.lock._is_owned())
        return taken(self, which, n)
    monkeypatch.setattr(type(space), "take", checked)
    h = be.upload(rng.standard_normal((64, 8192)).astype(np.float32))
    be.reduce("sum", h, (1,))                                  # a finishing reduction
    a = be.upload(rng.standard_normal((8, 2048)).astype(np.float32))
    b = be.upload(rng.standard_normal((2048, 16)).astype(np.float32))
    assert plans.matmul_plan(8, 16, 2048, 1).splits > 1
    be.matmul(a, b)                                            # a split-K product
    assert len(held) == 4 and all(held)      # (counters and partial results of each)


@pytest.mark.gpu
def test_pass_pool_does_not_grow_across_steps(gpu, rng):
    model = mlp()
    opt = dg.optimizer_sgd(model.parameters(), lr=0.1, momentum=0.9)
    x, y = rng.standard_normal((16, 12)).astype(np.float32), rng.integers(0, 5, 16)
    train_step(model, opt, x, y)
    first = dg.tape_mem()
    for _ in range(5):
        train_step(model, opt, x, y)
        now = dg.tape_mem()
        assert now["buffer_bytes"] == first["buffer_bytes"]
        assert now["n_buffers"] == first["n_buffers"]
        assert now["reserved_bytes"] == first["reserved_bytes"]
        assert now["p_buffer_bytes"] == first["p_buffer_bytes"]


@pytest.mark.gpu
def test_an_optimizer_step_reuses_the_table_of_the_step_before(gpu, rng, monkeypatch):
    # The steady step updates the same parameters from gradients made at the same
    # addresses: its one-dispatch update reads the table the first step wrote and writes
    # none, and trains bit for bit as steps that each write their own table do. (Steps
    # whose operands differ, a parameter without a gradient, are test_optim's.)
    x, y = rng.standard_normal((16, 12)).astype(np.float32), rng.integers(0, 5, 16)
    be = device.active()
    writes = []
    update = be.device.rec.update
    monkeypatch.setattr(be.device.rec, "update",
                        lambda *a, **k: (writes.append(a[2]), update(*a, **k)))

    def train(keep_tables):
        dg.manual_seed(3)
        model = mlp()
        opt = dg.optimizer_adam(model.parameters(), lr=1e-2)
        for _ in range(4):
            if not keep_tables:
                be.device.tables.clear()
            train_step(model, opt, x, y)
        return [p.numpy() for p in model.parameters()]

    def table_writes():
        return sum(len(w) == 4 * gpu_optim.TABLE_ENTRY.size for w in writes)
    kept = train(keep_tables=True)
    assert table_writes() == 1
    writes.clear()
    fresh = train(keep_tables=False)
    assert table_writes() == 4
    for k, f in zip(kept, fresh):
        np.testing.assert_array_equal(k, f)


@pytest.mark.gpu
def test_a_pass_tensor_from_an_earlier_tape_is_dead(gpu):
    with dg.with_grad_tape():
        y = dg.exp(dg.ag_param(np.ones(3)))
    with dg.with_grad_tape():
        pass
    with pytest.raises(dg.DeadTensorError, match="with_grad_tape"):
        y.numpy()
    with pytest.raises(dg.DeadTensorError):
        dg.add(y, 1.0)


@pytest.mark.gpu
def test_release_rescues_live_pass_tensors_too(gpu):
    x = dg.ag_tensor(np.arange(4.0))
    y = x * 2.0
    dg.ag_device("cpu")
    assert y.ptr is None
    np.testing.assert_array_equal(y.numpy(), np.arange(4.0) * 2)


@pytest.mark.gpu
def test_a_cpu_parameter_moves_to_the_device_once(gpu):
    dg.ag_device("cpu")
    w = dg.ag_param(np.ones((4, 4)))
    dg.ag_device("gpu")
    dg.reset_transfer_stats()
    for _ in range(3):
        with dg.with_grad_tape():
            loss = dg.sum(w * w)
            loss.backward()
    assert dg.tape_mem()["p_n_buffers"] >= 2           # the weight and its gradient
    assert w.scope == "persistent" and w._host is None
    assert dg.transfer_stats()["h2d_bytes"] == w.size * 4
    np.testing.assert_allclose(w.grad.numpy(), np.full((4, 4), 6.0))


@pytest.mark.gpu
def test_optimizer_state_returns_to_the_persistent_pool(gpu, rng):
    model = mlp()
    opt = dg.optimizer_adam(model.parameters(), lr=1e-3)
    x, y = rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 5, 8)
    train_step(model, opt, x, y)
    dg.ag_device("cpu")
    train_step(model, opt, x, y)
    dg.ag_device("gpu")
    train_step(model, opt, x, y)
    for state in opt.state:
        assert state["exp_avg"].scope == "persistent"
        assert state["exp_avg_sq"].scope == "persistent"
    with dg.with_grad_tape():                # a tape reset must not lose them
        pass
    train_step(model, opt, x, y)
    assert all(s["step"] == 4 for s in opt.state)


@pytest.mark.gpu
def test_backward_refuses_a_graph_from_the_other_backend(gpu):
    with dg.with_grad_tape():
        loss = dg.sum(dg.ag_param(np.ones(3)) * 2.0)
    dg.ag_device("cpu")
    with pytest.raises(dg.DualgradError):
        loss.backward()


@pytest.mark.gpu
def test_float64_is_refused_on_the_gpu(gpu):
    with pytest.raises(dg.ArgumentTypeError, match="float32"):
        dg.ag_tensor(np.ones(3), dtype="float64")


@pytest.mark.gpu
def test_devices_lists_the_device_in_use(gpu):
    found = dg.devices()
    assert found and {"index", "name", "type", "memory_mib", "api_version", "driver"} <= \
        set(found[0])
    assert any(d["usable"] for d in found)


@pytest.mark.gpu
def test_threads_sharing_the_device_get_correct_results(gpu):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 20)).astype(np.float32)
    expected = a.astype(np.float64) @ b
    errors = []

    def work():
        try:
            for _ in range(20):
                got = (dg.ag_tensor(a) @ dg.ag_tensor(b)).numpy()
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_device_choice_ranks_by_type():
    from dualgrad.gpu.context import choose
    found = [dict(index=0, name="llvmpipe", type_code=4, usable=True),
             dict(index=1, name="Integrated", type_code=1, usable=True),
             dict(index=2, name="Discrete", type_code=2, usable=True),
             dict(index=3, name="Broken Discrete", type_code=2, usable=False)]
    assert choose(found, None)["name"] == "Discrete"
    assert choose(found[:2], None)["name"] == "Integrated"
    assert choose(found, 0)["name"] == "llvmpipe"
    os.environ["DUALGRAD_VK_DEVICE"] = "integr"
    try:
        assert choose(found, None)["name"] == "Integrated"
    finally:
        del os.environ["DUALGRAD_VK_DEVICE"]
    with pytest.raises(dg.DeviceUnavailable, match="no Vulkan device matches"):
        choose(found, 9)
    with pytest.raises(dg.DeviceUnavailable, match="lacks Vulkan 1.2"):
        choose(found, 3)


def _run(code: str, env: dict, path: str = "") -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter; ``path`` goes in front of the inherited PYTHONPATH."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=child_env(path, **env),
                          cwd=str(ROOT), timeout=300)


def test_no_vulkan_loader_gives_a_clear_error(tmp_path):
    # A 'vulkan' package whose loader is missing raises OSError at import, as the real one
    # does on a machine without libvulkan.
    fake = tmp_path / "vulkan"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise OSError('cannot load libvulkan.so.1')\n")
    out = _run("""
        import dualgrad as dg
        print(dg.devices())
        try:
            dg.ag_device("gpu")
        except dg.DeviceUnavailable as e:
            print("unavailable:", e)
        print(dg.ag_device())
    """, {}, path=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "[]" in out.stdout
    assert "unavailable:" in out.stdout and "libvulkan1" in out.stdout
    assert out.stdout.strip().endswith("cpu")


def test_no_vulkan_device_gives_a_clear_error():
    out = _run("""
        import dualgrad as dg
        try:
            dg.ag_device("gpu")
        except dg.DeviceUnavailable as e:
            print("unavailable:", e)
    """, {"VK_DRIVER_FILES": "/nonexistent/icd.json", "VK_ICD_FILENAMES": "/nonexistent.json"})
    assert out.returncode == 0, out.stderr
    assert "unavailable:" in out.stdout and "mesa-vulkan-drivers" in out.stdout


def test_every_shader_is_compiled_and_current():
    manifest = json.loads((SPIRV / "MANIFEST.json").read_text())["shaders"]
    sources = sorted(p.stem for p in SHADERS.glob("*.comp"))
    assert sorted(manifest) == sources
    for name in sources:
        assert (SPIRV / f"{name}.spv").stat().st_size > 0
        assert manifest[name] == source_hash(SHADERS / f"{name}.comp"), \
            f"{name}.spv is stale: run `make shaders`"


def test_the_op_code_header_is_generated_from_the_registry():
    """shaders/opcodes.glsl is what dualgrad/kernel_ops.py renders (``make shaders`` writes
    it), and it gives every op of every family its registry code."""
    text = (SHADERS / "opcodes.glsl").read_text()
    assert text == kernel_ops.glsl_header(), "opcodes.glsl is stale: run `make shaders`"
    codes = {name: int(v) for name, v in re.findall(r"\b([A-Z_0-9]+) = (\d+)", text)}
    for family in (kernel_ops.UNARY, kernel_ops.BINARY, kernel_ops.REDUCE):
        for op in family:
            assert codes[op.name.upper()] == op.code
    assert codes["COUNT_EQ"] == len(kernel_ops.REDUCE)
    for rule, names in kernel_ops.OPTIM_HYPER.items():
        assert codes[f"RULE_{rule.upper()}"] == kernel_ops.OPTIM.code[rule]
        for i, name in enumerate(names):
            assert codes[f"{rule.upper()}_{name.upper()}"] == i
    for name, bit in kernel_ops.OPTIM_FLAGS:
        assert codes[f"FLAG_{name.upper()}"] == bit


def test_float_controls_are_added_to_the_spirv(tmp_path):
    import shutil
    import struct
    from dualgrad.gpu import float_controls as fc
    code = (SPIRV / "unary.spv").read_bytes()
    patched = fc.apply(code, (fc.SIGNED_ZERO_INF_NAN_PRESERVE, fc.DENORM_PRESERVE))
    words = struct.unpack(f"<{len(patched) // 4}I", patched)
    at, caps, modes = 5, [], []
    while at < len(words):
        count, opcode = words[at] >> 16, words[at] & 0xFFFF
        if opcode == fc.OP_CAPABILITY:
            caps.append(words[at + 1])
        elif opcode == fc.OP_EXECUTION_MODE:
            modes.append(tuple(words[at + 2:at + count]))
        at += count
    assert {4464, 4466} <= set(caps)
    assert (4459, 32) in modes and (4461, 32) in modes
    assert fc.apply(code, ()) == code
    validator = shutil.which("spirv-val")
    if validator:              # installed by scripts/install-system-deps.sh
        path = tmp_path / "patched.spv"
        path.write_bytes(patched)
        out = subprocess.run([validator, "--target-env", "vulkan1.2", str(path)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["adam", "sgd", "sgd without momentum", "rmsprop"])
@pytest.mark.parametrize("sizes", [[3000, 1, 0, 1024, 5000], [7] * 300],
                         ids=["spans of workgroups", "past one table"])
def test_one_update_of_many_tensors_is_each_ones_update_in_few_dispatches(gpu, rng, kind,
                                                                          sizes):
    """The table dispatch (optim_steps) gives each tensor the bits its own update gives it,
    tensors spanning several workgroups or one, empty ones skipped, absent state slots
    left alone; MAX_TABLE tensors a dispatch."""
    from dualgrad.api.optimizers import adam_hyper
    from dualgrad.gpu.kernels.optim import MAX_TABLE
    be = device.active()
    rule = kind.split()[0]
    if kind == "adam":
        hyper, width = adam_hyper(1e-2, (0.9, 0.999), 1e-8, 0.01, 3, False), 2
    elif kind == "rmsprop":          # a momentum buffer, no mean: the middle slot only
        hyper, width = dict(alpha=0.99, one_minus_alpha=0.01, eps=1e-8, l2=0.01, lr=0.01,
                            momentum=0.9, momentum_buffer=True), 2
    else:
        momentum = 0.9 if kind == "sgd" else 0.0
        hyper = dict(lr=0.05, momentum=momentum, dampening=0.1, wd=0.01,
                     nesterov=bool(momentum), first=False, momentum_buffer=bool(momentum))
        width = 1 if momentum else 0
    states = [[np.abs(rng.standard_normal(n)).astype(np.float32) for _ in range(2 + width)]
              for n in sizes]

    def operands(arrays):
        w, g, *state = [be.upload(a) for a in arrays]
        return w, g, (state[0], state[1], None) if kind == "rmsprop" else tuple(state)
    one = [operands(s) for s in states]
    for w, g, state in one:
        be.optim_step(rule, w, g, state, hyper)
    many = [operands(s) for s in states]
    be.device.rec.flush()
    before = be.device.rec.counters.dispatches
    be.optim_steps(rule, many, hyper)
    tables = -(-sum(1 for n in sizes if n) // MAX_TABLE)
    assert be.device.rec.counters.dispatches - before == tables
    for a, b in zip(one, many):
        for x, y in zip((a[0], a[1], *a[2]), (b[0], b[1], *b[2])):   # every operand
            if x is not None:
                assert np.array_equal(be.download(x), be.download(y))


@pytest.mark.gpu
def test_opening_the_device_refuses_a_bad_tensor_core_switch_on_any_device():
    require_gpu()
    code = "import dualgrad as dg; dg.ag_device('gpu')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(DUALGRAD_VK_TENSOR_CORES="off"), timeout=120)
    assert done.returncode != 0
    assert "InvalidValueError: environment variable DUALGRAD_VK_TENSOR_CORES is 'off'" \
        in done.stderr


@pytest.mark.gpu
def test_a_software_device_says_once_what_it_is():
    require_gpu()
    code = ("import dualgrad as dg\n"
            "for name in ('gpu', 'cpu', 'gpu'): dg.ag_device(name)\n"
            "print(dg.api.device.active().ctx.info['type'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    notices = done.stderr.count("is a software emulation on the CPU, meant for testing")
    assert notices == (1 if done.stdout.strip() == "cpu" else 0)


@pytest.mark.gpu
def test_the_kernel_timer_charges_each_dispatch_to_its_shader(gpu, rng):
    from dualgrad.gpu.timer import KernelTimer
    be = device.active()
    x = be.upload(rng.standard_normal(1 << 16).astype(np.float32))
    want = be.download(be.unary("exp", x))
    timer = KernelTimer(be.device)
    try:
        with timer:
            outs = [be.unary("exp", x) for _ in range(3)]
            be.binary("add", outs[0], outs[1])
            got = be.download(outs[2])
        shaders = {name: n for name, n in timer.calls.items() if not name.startswith("(")}
        assert shaders == {"unary": 3, "binary": 1}
        assert timer.calls["(copy)"] >= 1                # the download's, on a row of its own
        assert timer.seconds["unary"] > 0 and "unary" in timer.table(3)
        np.testing.assert_array_equal(got, want)        # timing changes no result
        assert be.device.rec.timer is None
        be.unary("exp", x)                               # none timed once it is left
        be.device.rec.flush(wait=True)
        assert timer.calls["unary"] == 3
    finally:
        timer.close()


@pytest.mark.gpu
def test_the_kernel_timer_charges_transfers_to_rows_of_their_own(gpu, rng):
    """An upload's copy and a fill are timed apart, not charged to the kernel after them."""
    from dualgrad.gpu.timer import KernelTimer
    be = device.active()
    data = rng.standard_normal(1 << 12).astype(np.float32)
    be.download(be.unary("neg", be.upload(data)))                # (the pipeline made)
    timer = KernelTimer(be.device)
    try:
        with timer:
            x = be.upload(data)
            be.fill(x, 0.5)
            y = be.unary("neg", x)
            be.device.rec.flush(wait=True)
        assert timer.calls["(copy)"] >= 1 and timer.calls["(fill)"] == 1
        assert timer.calls["unary"] == 1 and "(fill)" in timer.table()
        np.testing.assert_array_equal(be.download(y), np.full(data.shape, -0.5, np.float32))
    finally:
        timer.close()


@pytest.mark.gpu
def test_the_kernel_timer_stops_timing_transfers_before_its_timestamps_run_out(gpu,
                                                                              monkeypatch):
    """Past MAX_BATCH transfers in a batch, a transfer's time goes to the command after it
    (the timestamps it has are the batch's start, MAX_BATCH dispatches and as many
    transfers), and every dispatch still gets its own."""
    from dualgrad.gpu import timer as timer_module
    be = device.active()
    data = np.arange(256, dtype=np.float32)
    be.download(be.unary("neg", be.upload(data)))                # (the pipeline made)
    monkeypatch.setattr(timer_module, "MAX_BATCH", 4)
    timer = timer_module.KernelTimer(be.device)
    try:
        with timer:
            xs = [be.upload(data) for _ in range(10)]
            ys = [be.unary("neg", x) for x in xs[:2]]
            be.device.rec.flush(wait=True)
        assert timer.capacity == 9
        assert timer.calls == {"(copy)": 4, "unary": 2}
        np.testing.assert_array_equal(be.download(ys[1]), -data)
    finally:
        timer.close()


@pytest.mark.gpu
def test_the_kernel_timer_by_spec_keeps_a_shaders_specializations_apart(gpu, rng):
    """profile_gpu.py --by-spec: one row per shader and specialization constants."""
    from dualgrad.gpu.timer import KernelTimer
    be = device.active()
    x = be.upload(rng.standard_normal(1 << 12).astype(np.float32))
    be.download(be.unary("exp", x)), be.download(be.unary("tanh", x))     # (pipelines made)
    timer = KernelTimer(be.device, by_spec=True)
    try:
        with timer:
            be.unary("exp", x), be.unary("exp", x), be.unary("tanh", x)
            be.device.rec.flush(wait=True)
        names = sorted(timer.calls)
        assert len(names) == 2 and all(n.startswith("unary (") for n in names)
        assert sorted(timer.calls.values()) == [1, 2]
    finally:
        timer.close()


def test_a_shader_can_be_given_as_spirv_only_before_its_module_is_made(gpu):
    """Pipelines.use_spirv (bench/kernel_parts.py's kernel variants): a name the package has
    no .spv for gets pipelines from the SPIR-V given; a second module for it, or one for a
    shader already in use, is refused."""
    pipelines = device.active().device.pipelines
    with pytest.raises(FileNotFoundError):
        pipelines.get("bench_variant_absent")
    pipelines.use_spirv("bench_variant", (SPIRV / "convert.spv").read_bytes())
    assert pipelines.get("bench_variant") is not None
    with pytest.raises(dg.errors.CallOrderError, match="'bench_variant' already has"):
        pipelines.use_spirv("bench_variant", (SPIRV / "convert.spv").read_bytes())
    x = dg.tensor(np.ones(4, np.float32))
    (x + x).numpy()                                             # (binary's module made)
    with pytest.raises(dg.errors.CallOrderError, match="'binary' already has"):
        pipelines.use_spirv("binary", (SPIRV / "convert.spv").read_bytes())
