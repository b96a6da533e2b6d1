"""Installing the package, then installing it again editable, works as a user does it: the
kernels a run compiles are cached outside the installed package (under the cache
directory), so nothing is left behind in site-packages to shadow the next install."""
import os
import pathlib
import site
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUN_A_KERNEL = ("import numpy as np, dualgrad as dg\n"
                "print(dg.__version__, dg.exp(dg.ag_tensor(np.arange(3.0))).numpy()[1])\n")


def _run(*args, cwd, env):
    done = subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=900)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_install_run_a_kernel_reinstall_editable_then_run_from_elsewhere(tmp_path):
    venv, cache, elsewhere = tmp_path / "venv", tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR", "VIRTUAL_ENV")}
    env["DUALGRAD_CACHE_DIR"] = str(cache)
    # numba, numpy and the rest come from this interpreter's site-packages (behind the new
    # environment's own, through a .pth file): no download
    _run(sys.executable, "-m", "venv", str(venv), cwd=tmp_path, env=env)
    python = str(venv / "bin" / "python")
    own = _run(python, "-c", "import site; print(site.getsitepackages()[0])", cwd=tmp_path,
               env=env).strip()
    pathlib.Path(own, "_parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip = [python, "-m", "pip", "install", "-q", "--no-deps"]
    _run(*pip, str(ROOT), cwd=elsewhere, env=env)
    out = _run(python, "-c", RUN_A_KERNEL, cwd=elsewhere, env=env)
    assert out.split()[1].startswith("2.718")
    installed = pathlib.Path(_run(python, "-c", "import dualgrad, os; "
                                  "print(os.path.dirname(dualgrad.__file__))",
                                  cwd=elsewhere, env=env).strip())
    assert str(installed).startswith(str(venv))
    left = [p for p in installed.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert not left, f"Numba's cache was written into the installed package: {left[:3]}"
    assert list((cache / "numba").rglob("*.nbi"))          # ... it went here instead
    _run(*pip, "-e", str(ROOT), cwd=elsewhere, env=env)
    info = _run(python, "-m", "dualgrad", "info", cwd=elsewhere, env=env)
    assert info.startswith("dualgrad ")
    where = _run(python, "-c", "import dualgrad; print(dualgrad.__file__)", cwd=elsewhere,
                 env=env).strip()
    assert where == str(ROOT / "dualgrad" / "__init__.py")
