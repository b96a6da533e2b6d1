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


PROBE_THE_LOCK = '''
import fcntl
import numpy as np
from dualgrad.cpu.jit import kernel


@kernel
def add_one(x):
    return x + 1


cache_file = add_one._cache._cache_file
states = []


def probing(method):
    def probe(*args):
        with open(cache_file._index_path + ".lock", "a") as f:   # another open: its own lock
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                states.append("free")
            except BlockingIOError:
                states.append("held")
        return method(*args)
    return probe


cache_file._load_index = probing(cache_file._load_index)
cache_file._save_index = probing(cache_file._save_index)
add_one(np.zeros(3))
add_one(np.zeros(3, np.int64))
print(" ".join(states))
'''


def test_a_kernel_reads_and_writes_its_cache_index_under_a_lock(tmp_path):
    """Processes filling one cache at once (data-parallel ranks) read and write each
    kernel's index under a lock held by every process: without it two of them compiling
    new signatures both took the first free data file, and the index could name one
    signature's machine code for the other's."""
    (tmp_path / "probe.py").write_text(PROBE_THE_LOCK)
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], capture_output=True,
                          text=True, env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    states = done.stdout.split()
    assert "held" in states and set(states) == {"held"}, states
