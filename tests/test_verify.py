"""``dualgrad verify`` and the differential checks it runs: they report agreement on a real
device, and a deliberately perturbed kernel makes them fail, naming the op."""
import json
import re
import subprocess
import sys
import warnings

import pytest

from dualgrad import cli
from dualgrad.api import device
from dualgrad.gpu import GpuBackend
from dualgrad.testing import CHECKS, Pair, run_check

pytestmark = pytest.mark.gpu
CHECK = {c.name: c for c in CHECKS}


def _nudged_unary(monkeypatch, target, factor):
    """Make the gpu's ``target`` unary op return its result times ``factor``."""
    original = GpuBackend.unary

    def unary(self, op, x, a=0.0, b=0.0, out=None):
        y = original(self, op, x, a, b, out)
        if op == target:
            original(self, "mul_scalar", y, factor, 0.0, out=y)
        return y
    monkeypatch.setattr(GpuBackend, "unary", unary)


@pytest.mark.parametrize("op,factor", [
    ("exp", 1 + 2 ** -12),       # ~4000 ULP: far outside exp's 3 + 2|x| ULP
    ("neg", 1 + 2 ** -23),       # 1 ULP: an exact op may not differ at all
])
def test_a_perturbed_kernel_is_caught_and_shrunk(gpu, monkeypatch, op, factor):
    _nudged_unary(monkeypatch, op, factor)
    report = run_check(CHECK[f"unary:{op}"], Pair(device.active()), examples=25)
    assert not report.ok
    assert report.failure.startswith(f"unary:{op}: unary:{op}: DISAGREE")
    assert "Draw 1 (x)" in report.failure            # the shrunk inputs are shown
    assert report.entries[f"unary:{op}"].failed


def test_an_unperturbed_check_passes_and_counts(gpu):
    report = run_check(CHECK["unary:exp"], Pair(device.active()), examples=7)
    assert report.ok and report.examples == 7
    entry = report.entries["unary:exp"]
    assert entry.cases == 7 and entry.worst <= 1.0 and not entry.failed
    assert report.entries["unary_backward:exp"].cases == 7


def test_verify_prints_progress_and_a_table_and_writes_json(gpu, tmp_path, capsys):
    path = tmp_path / "report.json"
    status = cli.main(["verify", "--examples", "3", "--report", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"[ 1/{len(CHECKS)}]" in out and "lockstep: 3 models" in out
    assert "matmul" in out and "all agree" in out
    report = json.loads(path.read_text())
    assert report["ok"] and report["examples_per_check"] == 3
    assert set(report["lockstep"]) == {
        "mlp_classifier", "regression", "sequence_classifier",
        "regression under bfloat16 autocast", "regression under float16 autocast"}
    assert report["entries"]["binary:add"]["bound"] == "exact"
    # (the 16-bit checks draw one op of their family per example: its entries share them)
    assert all(e["ok"] and e["cases"] >= (1 if "@" in key else 3)
               for key, e in report["entries"].items())
    assert device.ag_device() == "gpu"                   # the selection is restored


def test_verify_exits_nonzero_on_a_disagreement(gpu, monkeypatch, tmp_path, capsys):
    _nudged_unary(monkeypatch, "tanh", 1.001)
    path = tmp_path / "report.json"
    status = cli.main(["verify", "--only", "unary:tanh", "--examples", "5",
                       "--report", str(path)])
    out = capsys.readouterr().out
    assert status == 1
    assert "DISAGREE" in out and "unary:tanh disagrees" in out and "FAIL" in out
    report = json.loads(path.read_text())
    assert not report["ok"] and "unary:tanh" in report["failures"]
    assert not report["entries"]["unary:tanh"]["ok"]


def test_verify_runs_without_pytest(gpu):
    code = ("import sys, dualgrad.cli as c; s = c.main(['verify', '--only', 'permute', "
            "'--examples', '2']); assert 'pytest' not in sys.modules; sys.exit(s)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "permute" in done.stdout and "all agree" in done.stdout


@pytest.mark.parametrize("argv,message", [
    (["verify", "--examples", "0"], "positive"),
    (["verify", "--device", "x"], "device index"),
])
def test_verify_rejects_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_verify_reports_a_missing_device(capsys):
    status = cli.main(["verify", "--device", "99"])
    assert status == 2
    assert "dualgrad verify:" in capsys.readouterr().err


def test_verify_only_matching_nothing_is_an_error(capsys):
    status = cli.main(["verify", "--only", "no-such-check"])
    err = capsys.readouterr().err
    assert status == 2
    assert "argument 'only' ('no-such-check') is in no check's name" in err
    assert "verify: verify:" not in err
    assert device.ag_device() == "cpu"                   # nothing was opened


def test_verify_reports_a_legend_the_worst_inputs_and_the_seed(gpu, tmp_path, capsys):
    path = tmp_path / "report.json"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # NumPy's overflow notes stay quiet
        status = cli.main(["verify", "--only", "unary:exp", "--examples", "4", "--seed", "7",
                           "--report", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "seed 7" in out
    assert "max ULP: in float32 units in the last place" in out and "gamma(n)*S" in out
    worst = re.search(r"^  unary:exp +(.+)$", out, re.M)
    assert worst and re.search(r"\bx float32 \(", worst.group(1)), out
    report = json.loads(path.read_text())
    assert report["seed"] == 7 and report["derandomized"] is False
    assert report["entries"]["unary:exp"]["worst_input"] == worst.group(1)


def test_the_worst_input_is_the_example_of_the_largest_ratio():
    from dualgrad.testing.differential import EntryStats
    from dualgrad.testing.tolerances import Agreement
    stats = EntryStats("unary:exp")
    for worst, example in [(0.2, "a"), (0.7, "b"), (0.1, "c")]:
        stats.add(Agreement("unary:exp", True, 0.0, 0.0, worst, 1), example)
    assert (stats.worst, stats.worst_input) == (0.7, "b")
    other = EntryStats("unary:exp")
    other.add(Agreement("unary:exp", True, 0.0, 0.0, 0.9, 1), "d")
    stats.merge(other)
    assert (stats.worst, stats.worst_input, stats.cases) == (0.9, "d", 4)
