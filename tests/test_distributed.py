"""dualgrad.distributed: data-parallel training across processes.

The runs start real processes under ``mpiexec`` (tests/distributed/cases.py), 2 and 3 of
them (3 catches an assumption of a power of two), on the cpu backend and on the gpu one.
The pieces they stand on, the tape's post-accumulate-grad hooks, the backends' host
exchange and the sampler, are tested here in one process.
"""
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import dualgrad as dg
import dualgrad.distributed as dist
from dualgrad.api import device as api_device
from conftest import ROOT, child_env
from dualgrad.distributed import mpi_launcher

CASES = ROOT / "tests" / "distributed" / "cases.py"

# k processes with a batch of B each against one process with the batch of k B: each
# step's averaged gradient is the same sum of k B per-sample terms, only in another order
# (the mean of each process's mean, summed once by the reduce-scatter), so it differs by
# gamma(k B) ~ 24 * 2^-24 of its magnitudes; six steps of SGD with momentum or of Adam
# carry that into the parameters. Measured normwise relative gaps: at most 1.1e-7 (cpu,
# 3 processes) and 1.0e-7 (lavapipe, 2). The bound 1e-5 leaves a factor of 100 for other
# shapes and devices, and stays far below what a wrong average does (a gradient off by a
# factor k, or one process's alone, moves the weights by a fraction of a step: > 1e-3).
DATA_PARALLEL_BOUND = 1e-5


def mpiexec() -> str:
    """The mpiexec beside this interpreter (where the mpich wheel installs it), else the
    one on the PATH."""
    found = mpi_launcher()
    if found is None:
        pytest.fail("mpiexec is missing: install the test dependencies (pip install -e "
                    "'.[test]', which brings mpi4py and MPICH)")
    return found


def launch(n: int, backend: str, *cases: str, timeout: float = 600.0, **env):
    """Run ``cases`` in ``n`` processes; (completed process, seconds taken, rank 0's
    findings or None)."""
    out = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"dg-dist-{os.getpid()}-{time.time_ns()}.json"
    start = time.monotonic()
    done = subprocess.run([mpiexec(), "-n", str(n), sys.executable, str(CASES), backend,
                           str(out), *cases], env=child_env(ROOT / "tests", **env),
                          capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - start
    found = None
    if out.exists():
        found = json.loads(out.read_text())
        out.unlink()
    return done, took, found


def ran(n: int, backend: str, *cases: str, **env) -> dict:
    done, _, found = launch(n, backend, *cases, **env)
    assert done.returncode == 0 and found is not None, done.stdout + done.stderr
    return found


# How the processes average: through a shared-memory window (one host, the default) or by
# MPI's collectives (several hosts; forced here by the variable).
PATHS = {"shared": ("SharedAverager", {}),
         "collective": ("CollectiveAverager", {"DUALGRAD_DIST_SHARED_MEMORY": "0"})}


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("backend, path", [
    ("cpu", "shared"), ("cpu", "collective"),
    pytest.param("gpu", "shared", marks=pytest.mark.gpu)])
def test_processes_train_as_one_with_their_batches_joined(n, backend, path, request):
    if backend == "gpu":
        request.getfixturevalue("gpu")
    how, env = PATHS[path]
    found = ran(n, backend, "equivalence_sgd", "equivalence_adam", "accumulation",
                "mismatch", "unused", *(["capture"] if backend == "gpu" else []), **env)
    assert found["world"] == n and found["device"].startswith(backend)
    for kind in ("equivalence_sgd", "equivalence_adam"):
        case = found[kind]
        assert case["how"] == how
        assert case["buckets"] > 1
        # the first bucket went to the all-reduce thread while gradients were still due
        assert case["overlapped"]
        # the device copies straight into the averaged arrays where it imports host
        # memory (the cpu always: its stage-out writes the array)
        imports = backend == "cpu" or all(d["host_import"] for d in dg.devices())
        assert case["direct"] == imports
        assert case["identical"], f"{kind}: the replicas' parameters differ"
        assert max(case["gaps"]) < DATA_PARALLEL_BOUND, case["gaps"]
    # no_sync: gradients stay local, then the next pass averages what accumulated
    assert found["accumulation"]["kept_local"]
    assert found["accumulation"]["gap"] < DATA_PARALLEL_BOUND
    # a layer used by rank 0 alone: the others count zeros, and all take the same step
    assert found["unused"]["same_grads"] and found["unused"]["extra_grads_nonzero"]
    assert found["unused"]["identical"]
    assert "first difference" in found["mismatch"]["raised"]
    assert "'0.weight' of shape (16, 12)" in found["mismatch"]["raised"]
    assert "(17, 12)" in found["mismatch"]["raised"]
    if backend == "gpu":                # recorded in parts around the average, replayed
        case = found["capture"]
        assert case["reason"] == "" and case["replays"] == 3
        assert case["identical"]
        assert max(case["gaps"]) < DATA_PARALLEL_BOUND, case["gaps"]


@pytest.mark.parametrize("k", [2, 3, 4])
def test_the_shared_mean_sums_in_rank_order_across_blocks(k):
    # A slice that starts mid-array and spans partial blocks; summed left to right in
    # float32, then divided, as a scalar loop would (the replicas' bits depend on it).
    from dualgrad.distributed.reducer import MEAN_BLOCK, _mean_into
    rng = np.random.default_rng(k)
    n = 3 * MEAN_BLOCK + 77
    views = tuple((rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n))
                  .astype(np.float32) for _ in range(k))
    start, stop = 5, n - 3
    out = np.full(stop - start, np.nan, np.float32)
    _mean_into(views, start, stop, out)
    acc = views[0][start:stop].copy()
    for v in views[1:]:
        acc = acc + v[start:stop]          # (float32 + float32: rounded each time)
    expected = (acc.astype(np.float64) / k).astype(np.float32)
    assert np.array_equal(out, expected)


def test_a_bad_shared_memory_setting_is_named():
    done, _, _ = launch(2, "cpu", "equivalence_sgd", DUALGRAD_DIST_SHARED_MEMORY="yes")
    assert done.returncode != 0
    assert "DUALGRAD_DIST_SHARED_MEMORY is 'yes'" in done.stderr


def test_a_checkpoint_resumes_with_another_world_size_and_alone(tmp_path):
    path = str(tmp_path / "run.ckpt")
    saved = ran(2, "cpu", f"save:{path}")["save"]["params"]
    resumed = ran(3, "cpu", f"resume:{path}")["resume"]
    assert resumed["extra"] == {"steps": 3, "world": 2}
    assert resumed["identical"]
    assert resumed["steps"] == [4] * len(resumed["steps"])   # Adam's count went on
    for a, b in zip(saved, resumed["params"]):
        np.testing.assert_array_equal(np.array(a), np.array(b))
    # alone, without MPI: the file holds the inner module's state
    sys.path.insert(0, str(CASES.parent))
    try:
        import cases
    finally:
        sys.path.pop(0)
    model = cases.make_model(seed=11)
    extra = dg.load_checkpoint(path, model, dg.optim.Adam(model.parameters(), lr=1e-2))
    assert extra["world"] == 2
    for a, p in zip(saved, model.parameters()):
        np.testing.assert_array_equal(np.array(a, np.float32), p.numpy())


def test_a_failing_process_ends_the_run_at_once():
    done, took, _ = launch(2, "cpu", "fail", "timeout=300")
    assert done.returncode != 0
    assert took < 60, "the others waited for the failed process"
    assert "rank 1 of 2 failed" in done.stderr
    assert "a failure in rank 1's data" in done.stderr


def test_a_stuck_process_makes_the_others_fail_after_the_timeout():
    done, took, _ = launch(2, "cpu", "stall", "timeout=3")
    assert done.returncode != 0
    assert took < 60
    assert "DistributedTimeout" in done.stderr
    assert "did not complete within 3 s" in done.stderr


def test_init_refuses_a_world_size_it_was_not_started_with():
    script = ("import dualgrad.distributed as dist\n"
              "try:\n    dist.init('cpu', world_size=3)\n"
              "except dist.DistributedMismatch as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-c", script],
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("refused:") == 2              # (lines may interleave)
    assert done.stdout.count("2 processes but world_size=3") == 2


def test_the_documented_example_runs_in_two_processes(tmp_path):
    """docs/distributed.md's example, given a model, a dataset and two epochs."""
    import re
    text = (ROOT / "docs" / "distributed.md").read_text()
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S)
                  if "dist.init()" in b]
    setup = ("import numpy as np\nimport dualgrad as dg\nepochs = 2\n"
             "def make_model():\n"
             "    return dg.nn.Sequential(dg.nn.Linear(8, 16), dg.nn.ReLU(), dg.nn.Linear(16, 3))\n"
             "rng = np.random.default_rng(0)\n"
             "dataset = dg.data.TensorDataset(rng.standard_normal((256, 8)).astype(np.float32),"
             " rng.integers(0, 3, 256))\n")
    script = tmp_path / "train.py"
    script.write_text(setup + example + "print('done', dist.rank(), mean_loss)\n")
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, str(script)], cwd=tmp_path,
                          env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("done") == 2
    model = dg.nn.Sequential(dg.nn.Linear(8, 16), dg.nn.ReLU(), dg.nn.Linear(16, 3))
    dg.load_checkpoint(tmp_path / "run.ckpt", model)


def test_a_process_cut_off_from_its_launcher_says_so():
    """A launcher that started 2 processes (its variable says so) while MPI sees a world
    of one: mpi4py found another MPI library than the launcher's."""
    script = ("import dualgrad.distributed as dist\n"
              "try:\n    dist.init('cpu')\n"
              "except dist.DistributedError as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", script], env=child_env(PMI_SIZE="2"),
                          capture_output=True, text=True, timeout=120)
    assert "refused: init: mpiexec started 2 processes but this one sees a world of 1" in \
        done.stdout, done.stderr
    assert "MPI4PY_LIBMPI" in done.stdout


# -- in one process ------------------------------------------------------------------------

def test_the_world_must_be_joined_first():
    assert not dist.is_initialized()
    with pytest.raises(dist.DistributedError, match="init"):
        dist.rank()
    with pytest.raises(dist.DistributedError, match="init"):
        dist.DistributedDataParallel(dg.nn.Linear(2, 2))


@pytest.mark.parametrize("kwargs, match", [
    ({"device_kind": "tpu"}, "device_kind"), ({"world_size": 0}, "world_size"),
    ({"timeout": 0}, "timeout"), ({"timeout": "1"}, "timeout")])
def test_init_names_a_bad_argument(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        dist.init(**kwargs)
    assert not dist.is_initialized()


def _graph_with_hooks():
    w = dg.ag_param(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = dg.ag_param(np.ones(3, np.float32))
    seen = []
    handles = [t.register_post_accumulate_grad_hook(
        lambda t, name=name: seen.append((name, t.grad.numpy().copy())))
        for name, t in (("w", w), ("b", b))]
    return w, b, seen, handles


def test_a_post_accumulate_hook_sees_the_finished_gradient_once(device):
    w, b, seen, _ = _graph_with_hooks()
    x = dg.ag_tensor(np.ones((4, 2), np.float32))
    with dg.with_grad_tape():
        h = x @ w + b                     # w is used twice: the hook waits for both
        loss = (h * h).sum() + (x @ w).sum()
        loss.backward()
    assert [name for name, _ in seen] == ["b", "w"]
    np.testing.assert_array_equal(seen[1][1], w.grad.numpy())
    np.testing.assert_array_equal(seen[0][1], b.grad.numpy())


def test_hooks_fire_after_a_checkpointed_function_adds_its_share(device):
    w, b, seen, _ = _graph_with_hooks()
    x = dg.ag_tensor(np.ones((4, 2), np.float32))
    with dg.with_grad_tape():
        inner = dg.checkpoint(lambda t: dg.tanh(t @ w + b), x)
        loss = (inner * (x @ w)).sum()
        loss.backward()
    assert sorted(name for name, _ in seen) == ["b", "w"]
    np.testing.assert_array_equal(dict(seen)["w"], w.grad.numpy())


def test_a_removed_hook_is_not_called_and_leaves_need_hooks():
    w, b, seen, handles = _graph_with_hooks()
    for h in handles:
        h.remove()
    with dg.with_grad_tape():
        (dg.ag_tensor(np.ones((1, 2), np.float32)) @ w + b).sum().backward()
        with pytest.raises(dg.InvalidValueError, match="not a leaf"):
            (w * 2).register_post_accumulate_grad_hook(print)
    assert seen == []
    with pytest.raises(dg.ArgumentTypeError, match="hook"):
        w.register_post_accumulate_grad_hook(3)


def test_queued_callbacks_run_once_the_walk_is_done(device):
    from dualgrad.api import tape
    w, b, seen, _ = _graph_with_hooks()
    order = []
    w.register_post_accumulate_grad_hook(lambda t: tape.queue_callback(
        lambda: order.append(("callback", t.grad is not None))))
    with dg.with_grad_tape():
        (dg.ag_tensor(np.ones((1, 2), np.float32)) @ w + b).sum().backward()
    assert order == [("callback", True)]


def test_staging_out_and_in_moves_exact_values(device):
    """The host exchange of each backend (twins): values out at element offsets, back
    in at others, and a second staging through the same buffer."""
    backend = api_device.active()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (5, 1, 7)]
    handles = [backend.upload(a) for a in arrays]
    buffer = backend.host_buffer(16, np.float32)
    try:
        landing = backend.stage_out([(handles[0], 0), (handles[2], 6), (handles[1], 5)],
                                    buffer)
        assert landing.wait(30.0)
        np.testing.assert_array_equal(buffer.array[:13], np.concatenate(
            [arrays[0], arrays[1], arrays[2]]))
        buffer.array[:] = np.arange(16, dtype=np.float32)
        backend.stage_in(buffer, [(handles[2], 9), (handles[1], 0)])
        np.testing.assert_array_equal(backend.download(handles[2]), np.arange(9, 16))
        np.testing.assert_array_equal(backend.download(handles[1]), [0.0])
        assert backend.stage_out([(handles[2], 0)], buffer).wait(30.0)
        np.testing.assert_array_equal(buffer.array[:7], np.arange(9, 16))
    finally:
        buffer.close()


def test_staging_into_the_callers_own_memory(device):
    """A host buffer over an array of the caller's (page-aligned, whole pages): the cpu
    and a device that imports host memory copy straight into it; others into their own."""
    from dualgrad.distributed.reducer import _page_aligned
    backend = api_device.active()
    array = _page_aligned(2048, np.float32)
    values = np.arange(1500, dtype=np.float32) - 700
    h = backend.upload(values)
    buffer = backend.host_buffer(2048, np.float32, array)
    try:
        imports = device == "cpu" or all(d["host_import"] for d in dg.devices())
        assert (buffer.array is array) == imports
        assert backend.stage_out([(h, 100)], buffer).wait(30.0)
        np.testing.assert_array_equal(buffer.array[100:1600], values)
        buffer.array[100:1600] *= 2
        backend.stage_in(buffer, [(h, 100)])
        np.testing.assert_array_equal(backend.download(h), 2 * values)
    finally:
        buffer.close()


def test_the_sampler_shards_every_epoch_into_disjoint_equal_parts():
    shards = [dist.DistributedSampler(range(10), num_replicas=3, rank=r, seed=4)
              for r in range(3)]
    for epoch in (0, 1):
        for s in shards:
            s.set_epoch(epoch)
        parts = [s.indices() for s in shards]
        assert [len(p) for p in parts] == [4, 4, 4] == [len(s) for s in shards]
        joined = np.concatenate(parts)
        assert set(joined.tolist()) == set(range(10))           # padded with 2 repeats
        order = np.random.default_rng((4, epoch)).permutation(10)
        np.testing.assert_array_equal(parts[1], np.resize(order, 12)[1::3])
    assert not np.array_equal(shards[0].indices(), (shards[0].set_epoch(0),
                                                    shards[0].indices())[1])
    dropped = [dist.DistributedSampler(range(10), 3, r, shuffle=False, drop_last=True)
               for r in range(3)]
    assert [d.indices().tolist() for d in dropped] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]


@pytest.mark.parametrize("kwargs, match", [
    ({"num_replicas": 0, "rank": 0}, "num_replicas"), ({"num_replicas": 2, "rank": 2}, "rank"),
    ({"num_replicas": 2, "rank": 0, "seed": -1}, "seed")])
def test_the_sampler_names_a_bad_argument(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        dist.DistributedSampler(range(4), **kwargs)


def test_a_loader_takes_a_sampler_and_moves_its_epoch():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    sampler = dist.DistributedSampler(x, num_replicas=2, rank=1, seed=0)
    loader = dg.data.DataLoader(x, batch_size=2, sampler=sampler, to_device=False)
    assert len(loader) == 3
    first = np.concatenate(list(loader))
    second = np.concatenate(list(loader))
    assert sampler.epoch == 1
    np.testing.assert_array_equal(first[:, 0] / 2, (sampler.set_epoch(0), sampler.indices())[1])
    assert not np.array_equal(first, second)
    with pytest.raises(ValueError, match="shuffle"):
        dg.data.DataLoader(x, sampler=sampler, shuffle=True)
    with pytest.raises(TypeError, match="sampler"):
        dg.data.DataLoader(x, sampler=3)
