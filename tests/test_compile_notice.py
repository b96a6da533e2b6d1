"""The cpu backend says on stderr, once, that it is compiling kernels, and only when it is:
a kernel loaded from Numba's disk cache says nothing."""
import pathlib
import subprocess
import sys

from conftest import child_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTICE = "dualgrad: compiling cpu kernels"
USE_TWO_KERNELS = ("import numpy as np, dualgrad as dg\n"
                   "x = dg.ag_tensor(np.arange(4.0))\n"
                   "print(dg.exp(x).numpy().sum() + dg.sqrt(x).numpy().sum())\n")


def _run(cache_dir) -> subprocess.CompletedProcess:
    env = child_env(NUMBA_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", USE_TWO_KERNELS], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def test_notice_once_while_compiling_and_never_from_a_warm_cache(tmp_path):
    cold = _run(tmp_path)
    assert cold.stderr.count(NOTICE) == 1          # two kernels compiled, one line
    assert cold.stdout.strip() != ""
    warm = _run(tmp_path)                          # the same cache, now filled
    assert NOTICE not in warm.stderr
    assert warm.stdout == cold.stdout
