"""The cpu benchmark script keeps working: run at tiny sizes, it exits 0 and prints its tables
(PyTorch is left out, as in CI, so the peer column reads n/a)."""
import pathlib
import re
import subprocess
import sys

from conftest import child_env

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_bench_cpu_prints_its_tables_at_tiny_sizes():
    env = child_env()
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_cpu.py"), "--mlp", "16:8,32:4",
         "--elements", "4096", "--repeats", "2", "--rounds", "1", "--no-peer",
         "--cnn", "4", "--gpt", "2,8,16,1,2", "--attention", "16,24"],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Training step: ours vs n/a" in out
    steps = re.findall(r"Adam step MLP H=(\d+) batch=(\d+) +([\d.]+)ms +n/a +n/a", out)
    assert steps == [("16", "8", steps[0][2]), ("32", "4", steps[1][2])]
    assert all(float(ms) > 0 for _, _, ms in steps)
    # Every big-array row has NumPy as its peer, so it prints a ratio.
    ratios = re.findall(r"\(4096 el\.\) +[\d.]+ms +[\d.]+ms +([\d.]+)", out)
    assert len(ratios) == 10 and all(float(r) > 0 for r in ratios)
    convs = re.findall(r"^  (CNN Adam step, batch 4|conv2d 3x3 fwd\+bwd 4x\S+) +([\d.]+)ms +n/a",
                       out, re.M)
    assert len(convs) == 3 and all(float(ms) > 0 for _, ms in convs), out
    assert re.search(r"^  GPT AdamW step B=2 T=8 E=16 L=1 H=2 +[\d.]+ms +n/a", out, re.M), out
    lengths = re.findall(r"^  attention fwd\+bwd causal T=(\d+) D=64 \(4 x 8 heads\) +[\d.]+ms",
                         out, re.M)
    assert lengths == ["16", "24"], out
    warm = re.search(r"warm Numba cache +([\d.]+)s", out)
    assert warm and float(warm.group(1)) > 0


def test_bench_distributed_prints_its_tables_at_tiny_sizes():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_distributed.py"), "--mlp", "16:4",
         "--gpt", "none", "--sizes", "0.25,1", "--steps", "2", "--repeats", "2",
         "--no-peer"], capture_output=True, text=True, env=child_env(), timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "ours: SharedAverager" in out
    rows = re.findall(r"^ +([\d.]+) +([\d.]+)GB/s +([\d.]+)GB/s +([\d.]+)GB/s +([\d.]+)$",
                      out, re.M)
    assert [r[0] for r in rows] == ["0.25", "1"], out
    assert all(float(v) > 0 for r in rows for v in r[1:])
    step = re.search(r"ours +alone +([\d.]+) ms +2 processes +([\d.]+) ms +efficiency "
                     r"([\d.]+)", out)
    assert step and all(float(v) > 0 for v in step.groups()), out


def test_apart_times_each_side_in_its_own_processes():
    """bench/apart.py: ours and the peer each timed by processes of their own, the rows
    combined: every case once, ours timed, and a ratio where there is a peer (NumPy's
    big-array rows always have one)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "apart.py"), "--pairs", "2", "--",
         "--mlp", "16:8", "--elements", "4096", "--repeats", "2", "--rounds", "1",
         "--sections", "train,elementwise"],
        capture_output=True, text=True, env=child_env(), timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    step = [line for line in lines if line.startswith("Adam step MLP H=16 batch=8")]
    assert len(step) == 1 and re.search(r"[\d.]+ ms \([\d.]+-[\d.]+\)", step[0]), lines
    adds = [line for line in lines if line.startswith("add (4096 el.)")]
    assert len(adds) == 1
    ours, peer, ratio = re.findall(r"([\d.]+) ms \(", adds[0]) + \
        [adds[0].split(")")[-1].split()[0]]
    assert float(ours) > 0 and float(peer) > 0 and float(ratio) > 0
