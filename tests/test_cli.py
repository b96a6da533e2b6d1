"""The ``dualgrad`` command (run as ``python -m dualgrad``) and the demo behind it.

Each subprocess pays for importing NumPy and loading Numba's kernel cache, so the command is
run only a handful of times; the demo's training quality is checked in-process.
"""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import dualgrad as dg
from dualgrad import demo


def _run(tmp_path, *args) -> subprocess.CompletedProcess:
    # from an unrelated directory, so the installed package is what runs
    return subprocess.run([sys.executable, "-m", "dualgrad", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


# ---------------------------------------------------------------------------------------------
# The command

def test_info_prints_the_version_and_the_cpu_backend(tmp_path):
    result = _run(tmp_path, "info")
    assert result.returncode == 0, result.stderr
    assert re.search(rf"^dualgrad {re.escape(dg.__version__)}\b", result.stdout, re.M)
    assert re.search(r"\bcpu\b", result.stdout)


def test_demo_trains_and_reports(tmp_path):
    result = _run(tmp_path, "demo", "--steps", "30")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    progress = [line for line in lines if re.search(r"\bstep\s+\d+/30\b", line)]
    assert progress, result.stdout
    assert re.search(r"\bstep\s+30/30\b", progress[-1])   # the last step is always reported
    final = lines[-1]
    assert "accuracy" in final and "ms/step" in final, final
    accuracy = float(re.search(r"accuracy\s+([0-9.]+)", final).group(1))
    assert 0.0 <= accuracy <= 1.0


@pytest.mark.parametrize("args, needle", [
    (("demo", "--steps", "0"), "--steps"),
    (("frobnicate",), "frobnicate"),
    (("demo", "--device", "tpu"), "tpu"),
], ids=["zero-steps", "unknown-subcommand", "unknown-device"])
def test_bad_arguments_exit_non_zero_with_a_message(tmp_path, args, needle):
    result = _run(tmp_path, *args)
    assert result.returncode != 0
    assert needle in result.stderr, result.stderr
    assert "Traceback" not in result.stderr        # a message, not a crash
    assert "accuracy" not in result.stdout         # and nothing was trained


# ---------------------------------------------------------------------------------------------
# The demo in-process

def test_run_demo_learns_the_digits():
    lines = []
    result = demo.run_demo(steps=150, report_every=50, out=lines.append)
    assert result["accuracy"] > 0.5, result        # chance is 0.1
    assert result["steps"] == 150
    assert np.isfinite(result["loss"]) and result["loss"] < np.log(10)   # below chance loss
    steps = [int(m.group(1)) for line in lines if (m := re.search(r"step\s+(\d+)/150", line))]
    assert steps == [50, 100, 150]
    assert f"accuracy {result['accuracy']:.4f}" in lines[-1]   # the report matches the result
    assert dg.ag_device() == "cpu"                               # the previous device is back


def test_make_digits_shapes_dtypes_and_classes():
    x, y = demo.make_digits(500, seed=3)
    assert x.shape == (500, 64) and x.dtype == np.float32
    assert y.shape == (500,) and y.dtype == np.int64
    assert set(np.unique(y)) == set(range(10))
    assert np.isfinite(x).all()


def test_make_digits_is_deterministic_for_a_seed():
    x1, y1 = demo.make_digits(200, seed=5)
    x2, y2 = demo.make_digits(200, seed=5)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    x3, y3 = demo.make_digits(200, seed=6)
    assert not np.array_equal(x1, x3) and not np.array_equal(y1, y3)


def test_make_digits_images_show_their_digit():
    # without noise, an image is its glyph (shifted, with broken strokes): it has ink, none
    # of it negative, and the digit 1 has less ink than the digit 8
    x, y = demo.make_digits(400, seed=0, noise=0.0)
    assert (x >= 0).all() and (x.max(axis=1) > 0).all()
    ink = np.array([(x[y == d] > 0).sum(axis=1).mean() for d in range(10)])
    assert ink[1] < ink[8]


@pytest.mark.gpu
def test_demo_trains_to_the_same_accuracy_on_the_gpu(gpu):
    # Same seed, same batches: the two runs differ only by float32 rounding, so the trained
    # models must classify the test set (nearly) identically.
    dg.ag_device("cpu")
    cpu = demo.run_demo(device="cpu", steps=60, hidden=32, report_every=30, out=lambda s: None)
    gpu_run = demo.run_demo(device="gpu", steps=60, hidden=32, report_every=30, out=lambda s: None)
    assert gpu_run["accuracy"] > 0.3
    assert abs(gpu_run["accuracy"] - cpu["accuracy"]) <= 0.01
    assert abs(gpu_run["loss"] - cpu["loss"]) <= 1e-3 * (1 + cpu["loss"])


def test_a_bad_number_names_the_argument_in_plain_words(tmp_path):
    result = _run(tmp_path, "demo", "--steps", "abc")
    assert result.returncode == 2
    assert "argument --steps: expected a positive integer, got 'abc'" in result.stderr
    assert "_positive" not in result.stderr


def test_help_is_plain_text(tmp_path):
    result = _run(tmp_path, "--help")
    assert result.returncode == 0 and "verify" in result.stdout
    assert "``" not in result.stdout


def test_progress_is_quiet_off_a_terminal_and_live_on_one():
    import io
    from dualgrad.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, live in ((io.StringIO(), False), (Terminal(), True)):
        progress = Progress(3, "work", stream, interval=0.0)
        progress.show(1, "first")
        progress.log("a line that stays")
        progress.show(2, "second")
        progress.close()
        text = stream.getvalue()
        assert "a line that stays\n" in text
        assert ("work [1/3] first" in text) is live and ("\r" in text) is live
        if live:
            assert text.endswith("\r")                   # the display is cleared


def test_the_demo_data_helper_is_documented():
    doc = demo.make_digits.__doc__
    assert "(n, 64)" in doc and "int64" in doc and "seed" in doc
