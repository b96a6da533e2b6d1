"""bench/bench_gpu.py runs end to end at tiny sizes (on whatever Vulkan device is here) and
prints its table: every case with our time and a ratio, or "n/a" without a CUDA peer."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import require_gpu

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench" / "bench_gpu.py"


@pytest.mark.exhaustive
@pytest.mark.gpu
def test_gpu_benchmark_prints_its_table():
    require_gpu()
    result = subprocess.run([sys.executable, str(BENCH), "--tiny", "--sections",
                             "matmul,kernels,memory,train,floor,startup"], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "GPU backend vs PyTorch CUDA" in out
    assert re.search(r"no pipeline cache \d+\.\d+s, with the one a first run left \d+\.\d+s",
                     out), out
    rows = re.findall(r"^  (\S.*?)\s+(\d+\.\d+)ms\s+(n/a|\d+\.\d+ms)\s+(n/a|\d+\.\d+)\s+<= ",
                      out, re.M)
    names = [r[0] for r in rows]
    assert len(rows) == 9 + 15 + 2, out           # matmul cases, memory cases, two steps
    assert any(n.startswith("matmul 64^3") for n in names)
    # Each matmul row also shows one call and its wait (ours alone without a peer).
    waits = [re.search(r"; a call and its wait (\d+)(/\d+)?us\]$", n) for n in names[:9]]
    assert all(waits) and all(int(w.group(1)) > 0 for w in waits), names
    assert any(n.startswith("sum (all)") for n in names)
    assert any(n.startswith("Adam step MLP H=32 batch=16 [") for n in names)
    assert any(n.startswith("Adam step MLP H=32 batch=16 replayed [") for n in names)
    for name, ours, peer, ratio in rows:
        assert float(ours) > 0, name
        assert (peer == "n/a") == (ratio == "n/a"), name
    # The matmul cases again, recorded once and replayed (no target: a diagnosis).
    kernels = re.findall(r"^  recorded matmul (\S.*?) \[.*?TF/s\]\s+(\d+\.\d+)ms", out, re.M)
    assert [k[0] for k in kernels] == [n.split(" [")[0][len("matmul "):]
                                       for n in names[:9]], out
    assert all(float(t) > 0 for _, t in kernels), out
    floors = re.findall(r"^  floor: .*?, chained \[host \d+\.\d+us\]\s+(\d+\.\d+)ms", out, re.M)
    assert len(floors) == 2 and all(float(t) > 0 for t in floors), out
    # ... and recorded once and replayed: the device's own cost of a dependent dispatch.
    recorded = re.findall(r"^  recorded floor: (.*?), chained\s+(\d+\.\d+)ms", out, re.M)
    assert [r[0] for r in recorded] == ["relu of 64", "256 x 10 x 1024 product x W^T"], out
    assert all(float(t) > 0 for _, t in recorded), out


@pytest.mark.gpu
def test_gpu_benchmark_times_the_autocast_step():
    require_gpu()
    result = subprocess.run([sys.executable, str(BENCH), "--tiny", "--sections", "amp"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^  Adam step MLP H=32 batch=16 bf16 autocast( replayed)? +"
                      r"(\d+\.\d+)ms", result.stdout, re.M)
    assert [r[0] for r in rows] == ["", " replayed"], result.stdout
    assert all(float(r[1]) > 0 for r in rows)


@pytest.mark.exhaustive
@pytest.mark.gpu
def test_host_benchmark_runs_the_training_step_live_against_a_revision():
    """bench/bench_host.py --live times the training step alone, run on the device, for
    this tree and for HEAD beside it."""
    require_gpu()
    script = BENCH.parent / "bench_host.py"
    result = subprocess.run([sys.executable, str(script), "--rounds", "2", "--calls", "10",
                             "--train", "32:16", "--against", "HEAD", "--live"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "run on the device" in result.stdout
    rows = re.findall(r"^  (\S.*?)\s+(\d+\.\d+)us\s+(\d+\.\d+)us\s+(\d+\.\d+)$",
                      result.stdout, re.M)
    assert [name for name, *_ in rows] == ["eager Adam step, MLP 784-32-32-10, batch 16"]
    assert all(float(t) > 0 for t in rows[0][1:3])


@pytest.mark.exhaustive
@pytest.mark.gpu
@pytest.mark.parametrize("live", [False, True], ids=["recorded", "live"])
def test_host_benchmark_times_the_training_steps_phases(live):
    """bench/bench_host.py --phases prints each phase of the eager step, this tree's and
    HEAD's with their ratio, and their total; run on the device, the wait too."""
    require_gpu()
    script = BENCH.parent / "bench_host.py"
    result = subprocess.run([sys.executable, str(script), "--rounds", "2", "--calls", "10",
                             "--train", "32:16", "--against", "HEAD", "--phases"] +
                            (["--live"] if live else []),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^  (\S+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)$", result.stdout,
                      re.M)
    phases = ["tape", "batch", "forward", "loss", "backward", "step", "zero_grad"]
    assert [name for name, *_ in rows] == phases + ["wait"] * live + ["total"], result.stdout
    times = {name: (float(ours), float(theirs)) for name, ours, theirs, _ in rows}
    assert all(times[name][0] > 0 and times[name][1] > 0 for name in ("forward", "backward"))
    parts = sum(ours for name, (ours, _) in times.items() if name != "total")
    assert abs(times["total"][0] - parts) <= 0.1 * len(rows)   # (the rows are rounded)


@pytest.mark.gpu
def test_host_benchmark_compares_with_a_revision():
    """bench/bench_host.py times each case for this tree and for a git revision loaded
    beside it (HEAD here, so the ratios are about 1 but are printed)."""
    require_gpu()
    script = BENCH.parent / "bench_host.py"
    result = subprocess.run([sys.executable, str(script), "--rounds", "2", "--calls", "10",
                             "--train", "32:16", "--against", "HEAD"], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^  (\S.*?)\s+(\d+\.\d+)us\s+(\d+\.\d+)us\s+(\d+\.\d+)$",
                      result.stdout, re.M)
    assert len(rows) == 10, result.stdout
    assert rows[-1][0] == "eager Adam step, MLP 784-32-32-10, batch 16"
    for name, ours, theirs, ratio in rows:
        assert float(ours) > 0 and float(theirs) > 0, name
        quotient = float(ours) / float(theirs)           # of the printed (rounded) times
        assert abs(float(ratio) - quotient) <= 0.005 + 0.02 * quotient, name


def test_host_benchmark_takes_a_copied_package_for_a_machine_without_git(tmp_path):
    """``--against DIR`` loads DIR's dualgrad/ (what ``git archive`` would give), copied as
    dualgrad_ref without its bytecode caches."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_host
    finally:
        sys.path.remove(str(BENCH.parent))
    source = tmp_path / "old"
    (source / "dualgrad" / "__pycache__").mkdir(parents=True)
    (source / "dualgrad" / "__init__.py").write_text("REVISION = 'old'\n")
    (source / "dualgrad" / "__pycache__" / "x.pyc").write_bytes(b"")
    into = tmp_path / "into"
    into.mkdir()
    bench_host.extract(str(source), str(into))
    assert (into / "dualgrad_ref" / "__init__.py").read_text() == "REVISION = 'old'\n"
    assert not (into / "dualgrad_ref" / "__pycache__").exists()
    assert not (into / "dualgrad").exists()


def bench_module():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import bench_gpu
    finally:
        sys.path.remove(str(BENCH.parent))
    return bench_gpu


@pytest.mark.gpu
def test_serial_products_wait_for_each_other(gpu):
    """By default each of our products writes the one output, so the recorder puts a
    barrier between every two; --overlap's independent calls get none."""
    bench_gpu = bench_module()
    ours = bench_gpu.Ours()
    ha, hb = ours.put(np.ones((64, 32), np.float32)), ours.put(np.ones((32, 48), np.float32))
    counters = ours.backend.device.rec.counters
    made = {}
    for flags in ([], ["--overlap"]):
        product = bench_gpu.our_product(bench_gpu.parse(["--tiny", *flags]), ours, ha, hb,
                                        64, 48, 32, False, False)
        product()
        before = counters.barriers
        for _ in range(5):
            product()
        made[bool(flags)] = counters.barriers - before
        ours.sync()
    assert made == {False: 5, True: 0}


@pytest.mark.exhaustive
@pytest.mark.gpu
@pytest.mark.parametrize("mode", [[], ["--recorded"]])
def test_the_sweep_prints_the_best_tiles_of_each_case(gpu, capsys, mode):
    """--sweep (here one small square, no peer), its calls one by one or recorded and
    replayed: a line per case, its eight fastest plans in order of time, then the plan's
    choice (starred) where it is not among them, and the planner as it was afterwards."""
    bench_gpu = bench_module()
    from dualgrad.gpu import plans
    natural = plans.matmul_plan
    args = bench_gpu.parse(["--tiny", "--sweep", *mode])
    args.squares, args.mlp_shapes = [32], []
    bench_gpu.sweep_matmul(args, bench_gpu.Ours(), None)
    assert plans.matmul_plan is natural
    out = capsys.readouterr().out
    assert ("recorded and replayed (kernels)" in out) == bool(mode), out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  32^3")]
    cells = re.findall(r"(\S+)\((\d+)\)(\*?) (\d+\.\d+) \[\d+\.\d+\]", line)
    assert len(cells) in (8, 9), line
    times = [float(c[3]) for c in cells[:8]]
    assert times == sorted(times) and times[0] > 0, line
    starred = [i for i, c in enumerate(cells) if c[2]]
    assert len(starred) == 1 and (len(cells) == 8 or starred == [8]), line


def test_tiles_names_the_sweeps_tiles_by_label_or_shape():
    """--tiles: labels of the sweep's list or BMxBNxBK/TMxTN shapes, in the order given;
    anything else stops the run naming the bad entry; empty: the whole list."""
    bench_gpu = bench_module()
    from dualgrad.gpu import plans
    tiles = bench_gpu.sweep_tiles("deep,64x128x32/4x8")
    assert list(tiles) == ["deep", "64x128x32/4x8"]
    assert tiles["deep"] == plans.TILES["deep"]
    assert tiles["64x128x32/4x8"] == plans.Tile(64, 128, 32, 4, 8)
    assert bench_gpu.sweep_tiles("") is bench_gpu.SWEEP_TILES
    with pytest.raises(SystemExit, match="'64x64/4x4' is neither"):
        bench_gpu.sweep_tiles("deep,64x64/4x4")


@pytest.mark.gpu
def test_only_keeps_the_matmul_cases_it_names(gpu):
    """--only TEXT: the matmul cases whose name contains TEXT, and no others."""
    bench_gpu = bench_module()
    ours = bench_gpu.Ours()

    def names(*argv):
        args = bench_gpu.parse(["--tiny", *argv])
        return [run[0] for run in bench_gpu.matmul_runs(args, ours, None)]
    every = names()
    assert len(every) == 9 and "64^3" in every             # a square and the MLP's eight
    assert names("--only", "g3^T h") == ["H32B16 bwd g3^T h"]
    assert names("--only", "bwd") == [n for n in every if "bwd" in n] != []


def test_gpt_products_add_the_gpt_steps_products_as_matmul_cases():
    """--gpt-products: each distinct product of the GPT layers (tokens = batch x context by
    the projections and the feed-forward, and their gradients), after the squares."""
    bench_gpu = bench_module()
    args = bench_gpu.parse(["--tiny", "--gpt-products", "--gpt", "2,8,16,1,2"])
    cases = bench_gpu.matmul_cases(args)
    gpt = [c for c in cases if c[0].startswith("GPT ")]
    assert len(gpt) == 12 and cases[1:13] == gpt             # (after the one square)
    shapes = {name: (m, n, k, ta, tb) for name, m, n, k, ta, tb in gpt}
    assert shapes["GPT qkv x W^T"] == (16, 48, 16, False, True)
    assert shapes["GPT ff up g^T x"] == (64, 16, 16, True, False)
    assert shapes["GPT ff down x W^T"] == (16, 16, 64, False, True)
    assert not any(c[0].startswith("GPT ")
                   for c in bench_gpu.matmul_cases(bench_gpu.parse(["--tiny"])))


def test_unary_names_the_unary_sections_ops():
    """--unary: the unary section's ops to time, a name it does not have refused."""
    bench_gpu = bench_module()
    assert bench_gpu.parse(["--unary", "erf,asinh"]).unary == ["erf", "asinh"]
    assert bench_gpu.parse([]).unary == []
    with pytest.raises(SystemExit):
        bench_gpu.parse(["--unary", "erf,erff"])


def test_the_sweep_sizes_a_tensor_tile_for_the_pieces_it_will_hold():
    """Under --low bfloat16 a tensor tile holds one piece of each operand, so a K step of
    64 fits 48 KiB; float32 products hold two (float16 pieces) and float16 ones three
    (bfloat16 pieces), and it fits neither; a K step of 32 fits two pieces, not three."""
    bench_gpu = bench_module()
    from dualgrad.gpu import plans
    deep = plans.TensorTile(128, 128, 64, 64, 32)
    k32 = plans.TensorTile(128, 128, 32, 64, 64)
    limits = (48 << 10, 1024, True)
    assert bench_gpu.sweepable(deep, 256, 256, 512, limits, "bfloat16")
    assert not bench_gpu.sweepable(deep, 256, 256, 512, limits, "float16")
    assert not bench_gpu.sweepable(deep, 256, 256, 512, limits)
    assert bench_gpu.sweepable(k32, 256, 256, 512, limits)
    assert not bench_gpu.sweepable(k32, 256, 256, 512, limits, "float16")
    assert not bench_gpu.sweepable(deep, 256, 256, 512, (48 << 10, 1024, False), "bfloat16")


@pytest.mark.gpu
def test_low_makes_our_products_autocasts(gpu, monkeypatch):
    """--low bfloat16: our product is autocast's (its operands rounded to bfloat16 by
    product_into's ``low``); by default, the float32 product."""
    bench_gpu = bench_module()
    ours = bench_gpu.Ours()
    ha, hb = ours.put(np.ones((32, 64), np.float32)), ours.put(np.ones((64, 16), np.float32))
    lows = []
    monkeypatch.setattr(bench_gpu, "product_into",
                        lambda *args, low=None, **kwargs: lows.append(low))
    for flags in ([], ["--low", "bfloat16"]):
        args = bench_gpu.parse(["--tiny", *flags])
        bench_gpu.our_product(args, ours, ha, hb, 32, 16, 64, False, False)()
    assert lows == [None, np.dtype("bfloat16")]


@pytest.mark.gpu
def test_recorded_calls_run_again_at_each_replay(gpu):
    """The kernels section's recording: its calls run once per replay, none while
    recorded, and the buffer is released afterwards."""
    bench_gpu = bench_module()
    ours = bench_gpu.Ours()
    be = ours.backend
    x = ours.put(np.arange(8, dtype=np.float32))
    acc = ours.put(np.zeros(8, np.float32))
    replay, release = bench_gpu.recorded(ours, lambda: be.binary("add", acc, x, out=acc), 3)
    ours.wait()
    assert np.array_equal(be.download(acc), np.zeros(8))
    replay()
    replay()
    ours.wait()
    release()
    assert np.array_equal(be.download(acc), 6 * np.arange(8))


@pytest.mark.gpu
def test_the_profile_prints_each_shaders_device_time():
    require_gpu()
    script = BENCH.parent / "profile_gpu.py"
    result = subprocess.run([sys.executable, str(script), "--gpt", "2,8,16,1,2", "--steps",
                             "1", "--warmup", "0"], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    rows = dict(re.findall(r"^  (\w+)\s+(\d+\.\d+)\s", result.stdout, re.M))
    assert {"matmul", "attention", "layernorm", "optim", "all"} <= set(rows), result.stdout
    assert float(rows["all"]) >= float(rows["matmul"]) > 0


@pytest.mark.gpu
def test_the_profile_times_the_mlp_step_and_its_autocast_form():
    require_gpu()
    script = BENCH.parent / "profile_gpu.py"
    for extra in ([], ["--autocast", "bfloat16"]):
        result = subprocess.run([sys.executable, str(script), "--case", "mlp", "--mlp", "32:16",
                                 "--steps", "1", "--warmup", "0", *extra],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        assert "MLP 784-32-32-10 Adam step, batch 16" in result.stdout
        rows = dict(re.findall(r"^  (\w+)\s+(\d+\.\d+)\s", result.stdout, re.M))
        assert {"optim", "softmax", "all"} <= set(rows), result.stdout
        assert float(rows["all"]) > float(rows["optim"]) > 0


@pytest.mark.gpu
def test_the_profile_times_each_dispatch_of_a_long_cumsum():
    require_gpu()
    script = BENCH.parent / "profile_gpu.py"
    result = subprocess.run([sys.executable, str(script), "--case", "cumsum", "--elements",
                             "20000", "--by-spec", "--steps", "1", "--warmup", "0"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "cumsum of one line of 20000" in result.stdout
    # a line of several tiles: the totals' dispatch (mode 1), then the scan's (mode 2)
    rows = dict(re.findall(r"^  (scan \(\d, \d+\)|all)\s+(\d+\.\d+)\s", result.stdout, re.M))
    assert {"scan (1, 8)", "scan (2, 8)", "all"} <= set(rows), result.stdout
    assert float(rows["all"]) >= float(rows["scan (1, 8)"]) > 0


def test_tensor_peak_says_how_to_build_its_shader_when_it_is_missing(tmp_path):
    script = BENCH.parent / "tensor_peak.py"
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent.parent)}
    code = ("import sys, pathlib; sys.path.insert(0, sys.argv[1]); import tensor_peak; "
            "tensor_peak.SPIRV = pathlib.Path(sys.argv[2]); tensor_peak.main([])")
    result = subprocess.run([sys.executable, "-c", code, str(script.parent),
                             str(tmp_path / "missing.spv")], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode != 0
    assert "missing.spv is missing (run with --build first)" in result.stderr


def test_kernel_parts_says_how_to_build_its_shaders_when_they_are_missing(tmp_path):
    script = BENCH.parent / "kernel_parts.py"
    code = ("import sys, pathlib; sys.path.insert(0, sys.argv[1]); import kernel_parts; "
            "kernel_parts.HERE = pathlib.Path(sys.argv[2]); kernel_parts.main([])")
    result = subprocess.run([sys.executable, "-c", code, str(script.parent), str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "matmul_bf16x6_no_loads.spv" in result.stderr
    assert "missing (run with --build first)" in result.stderr


@pytest.mark.gpu
def test_kernel_parts_times_a_part_on_tensor_cores_and_refuses_a_device_without(gpu):
    from dualgrad.api import device
    tensor_cores = bool(device.active().ctx.info.get("tensor_cores"))
    result = subprocess.run([sys.executable, str(BENCH.parent / "kernel_parts.py"), "--part",
                             "whole", "--precision", "bfloat16", "--squares", "256"],
                            capture_output=True, text=True, timeout=300)
    if tensor_cores:
        assert result.returncode == 0, result.stderr
        assert re.search(r"256\^3 +tc 128x128 w64 k32", result.stdout), result.stdout
    else:
        assert result.returncode != 0
        assert "no bfloat16 cooperative matrices" in result.stderr
