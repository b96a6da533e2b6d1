"""The README stays true: its example runs, on each backend, as written."""
import pathlib
import re

import numpy as np

import dualgrad as dg

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_the_example_runs_on_each_backend(device, tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    assert 'dg.ag_device("gpu")' in code
    code = code.replace('dg.ag_device("gpu")', f'dg.ag_device("{device}")')
    monkeypatch.chdir(tmp_path)
    np.random.seed(0)
    scope = {}
    exec(compile(code, str(README), "exec"), scope)
    assert np.isfinite(scope["loss"].item())
    assert (tmp_path / "model.ckpt").exists()
    assert dg.ag_device() == "cpu"
    # the weights came back from the device with the device's values
    assert all(p.ptr is None and p._host is not None for p in scope["model"].parameters())


def test_the_commands_named_in_the_readme_exist():
    text = README.read_text()
    makefile = (README.parent / "Makefile").read_text()
    for target in re.findall(r"^make (\w+)", text, re.M):
        assert re.search(rf"^{target}:", makefile, re.M), target


def readme_example(marker: str) -> str:
    """The README's python block that contains ``marker``."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
              if marker in b]
    assert len(blocks) == 1, marker
    return blocks[0]


def test_the_lockstep_example_runs(gpu, capsys):
    exec(compile(readme_example("lockstep("), str(README), "exec"), {})
    assert "the backends agree over 50 steps" in capsys.readouterr().out


def test_the_capture_example_runs_and_replays(gpu, capsys):
    exec(compile(readme_example("@dg.capture_step"), str(README), "exec"), {})
    loss, replays = capsys.readouterr().out.split()
    assert 0 < float(loss) < 2.5 and int(replays) == 48


def test_the_coming_from_pytorch_example_runs(device, tmp_path, monkeypatch):
    code = readme_example("import dualgrad as torch")
    assert 'device = "cpu"' in code
    code = code.replace('device = "cpu"', f'device = "{device}"')
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code, str(README), "exec"), scope)
    assert np.isfinite(scope["loss"].item()) and (tmp_path / "model.pt").exists()
