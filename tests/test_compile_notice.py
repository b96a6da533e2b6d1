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


def test_the_kernels_cache_is_kept_by_a_hash_of_their_sources(tmp_path):
    """The default cache directory is named by a hash of every module the kernels are
    compiled from (Numba checks only a kernel's own file): a changed formula in a module
    a kernel inlines from is compiled anew, not run as the old one's machine code."""
    from dualgrad.cpu import jit
    tag = jit.sources_tag()
    assert len(tag) == 16 and tag == jit.sources_tag()
    env = child_env(DUALGRAD_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", "from dualgrad.cpu import jit; "
                           "print(jit.CACHE_DIR)"], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "numba" / tag)
    copy = tmp_path / "copy" / "dualgrad"          # the sources with vmath.py changed
    for path in (ROOT / "dualgrad").rglob("*.py"):
        target = copy / path.relative_to(ROOT / "dualgrad")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    vmath = copy / "cpu" / "vmath.py"
    vmath.write_text(vmath.read_text() + "\n# changed\n")
    done = subprocess.run([sys.executable, "-c", "from dualgrad.cpu import jit; "
                           "print(jit.sources_tag())"], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(copy.parent)}, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() not in ("", tag)
