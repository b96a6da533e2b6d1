"""bench/bench_gpu.py runs end to end at tiny sizes (on whatever Vulkan device is here) and
prints its table: every case with our time and a ratio, or "n/a" without a CUDA peer."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from conftest import require_gpu

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench" / "bench_gpu.py"


@pytest.mark.gpu
def test_gpu_benchmark_prints_its_table():
    require_gpu()
    result = subprocess.run([sys.executable, str(BENCH), "--tiny"], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "GPU backend vs PyTorch CUDA" in out
    assert re.search(r"no pipeline cache \d+\.\d+s, with the one a first run left \d+\.\d+s",
                     out), out
    rows = re.findall(r"^  (\S.*?)\s+(\d+\.\d+)ms\s+(n/a|\d+\.\d+ms)\s+(n/a|\d+\.\d+)\s+<= ",
                      out, re.M)
    names = [r[0] for r in rows]
    assert len(rows) == 9 + 6 + 2, out            # matmul cases, memory cases, two steps
    assert any(n.startswith("matmul 64^3") for n in names)
    assert any(n.startswith("sum (all)") for n in names)
    assert any(n.startswith("Adam step MLP H=32 batch=16 [") for n in names)
    assert any(n.startswith("Adam step MLP H=32 batch=16 replayed [") for n in names)
    for name, ours, peer, ratio in rows:
        assert float(ours) > 0, name
        assert (peer == "n/a") == (ratio == "n/a"), name
