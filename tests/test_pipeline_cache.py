"""The pipeline cache on disk: written at exit through a rename, read back by the next
process, and a damaged or foreign file is never handed to the driver."""
import hashlib
import subprocess
import sys

import pytest

from conftest import child_env, require_gpu
from dualgrad import paths
from dualgrad.gpu import pipeline_cache

STEP = """
import numpy as np, dualgrad as dg
from dualgrad.api import device
dg.ag_device("gpu")
x = dg.ag_tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
print(float(dg.sum(dg.relu(x * 2.0)).item()))
p = device.active().device.pipelines
print(p.loaded_bytes, p.created)
"""


def run_step(cache_dir):
    out = subprocess.run([sys.executable, "-c", STEP], env=child_env(
        DUALGRAD_CACHE_DIR=str(cache_dir)), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    value, counts = out.stdout.split("\n")[:2]
    loaded, created = map(int, counts.split())
    return float(value), loaded, created


def cache_files(cache_dir):
    return sorted(p for p in cache_dir.glob("pipelines-*.bin"))


def test_load_returns_only_intact_data(tmp_path):
    path = tmp_path / "c.bin"
    assert pipeline_cache.save(path, b"driver data")
    assert pipeline_cache.load(path) == b"driver data"
    raw = path.read_bytes()
    for damaged in (raw[:-1], raw[:10], raw[:-1] + bytes([raw[-1] ^ 1]),
                    b"X" + raw[1:], b""):
        path.write_bytes(damaged)
        assert pipeline_cache.load(path) == b""
    assert pipeline_cache.load(tmp_path / "missing.bin") == b""
    assert pipeline_cache.load(None) == b""
    assert not list(tmp_path.glob("*.tmp"))


def test_an_unwritable_place_is_reported_not_raised(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert not pipeline_cache.save(blocker / "sub" / "c.bin", b"data")
    assert "pipeline cache was not saved" in capsys.readouterr().err


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DUALGRAD_CACHE_DIR", str(tmp_path))
    assert paths.cache_directory() == tmp_path
    monkeypatch.setenv("DUALGRAD_CACHE_DIR", "")
    assert paths.cache_directory() is None
    monkeypatch.delenv("DUALGRAD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_directory() == tmp_path / "xdg" / "dualgrad"


@pytest.mark.gpu
def test_a_second_process_starts_from_the_first_ones_pipelines(tmp_path):
    require_gpu()
    value, loaded, created = run_step(tmp_path)
    assert value == 132.0 and loaded == 0 and created > 0
    (path,) = cache_files(tmp_path)
    raw = path.read_bytes()
    head = len(pipeline_cache.MAGIC) + 32
    assert raw.startswith(pipeline_cache.MAGIC)
    assert raw[len(pipeline_cache.MAGIC):head] == hashlib.sha256(raw[head:]).digest()
    value2, loaded2, _ = run_step(tmp_path)
    assert value2 == value and loaded2 == len(raw) - head > 0


@pytest.mark.gpu
def test_a_damaged_cache_file_is_ignored_and_replaced(tmp_path):
    require_gpu()
    run_step(tmp_path)
    (path,) = cache_files(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good[:-7])                  # as a crash of some other writer might
    value, loaded, created = run_step(tmp_path)
    assert value == 132.0 and loaded == 0 and created > 0
    assert pipeline_cache.load(path)             # whole again


@pytest.mark.gpu
def test_an_empty_cache_dir_setting_turns_the_cache_off(tmp_path):
    require_gpu()
    out = subprocess.run([sys.executable, "-c", STEP], env=child_env(DUALGRAD_CACHE_DIR=""),
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[1].split()[0] == "0"
    assert not list(tmp_path.rglob("pipelines-*.bin"))
