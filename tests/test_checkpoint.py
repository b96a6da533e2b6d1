"""Checkpoints: exact round trips and resumption (in the same and in a fresh process),
refusal of files that do not fit or are damaged, and atomic writes that never leave a
partial file at the target, even when the saving process is killed midway.
"""
import errno
import json
import os
import pathlib
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import dualgrad as dg
from conftest import child_env

VOCAB, BATCH = 10, 12
ROOT = pathlib.Path(__file__).resolve().parent.parent


class Net(dg.nn.Module):
    """Embedding -> Linear -> LayerNorm -> GELU -> Dropout -> Linear, plus a layer the
    forward never uses (so one parameter never has a gradient, hence no optimizer state)."""

    def __init__(self, hidden=8, extra_layer=False):
        super().__init__()
        self.emb = dg.nn.Embedding(VOCAB, 6)
        layers = [dg.nn.Linear(6, hidden), dg.nn.LayerNorm(hidden), dg.nn.GELU(),
                  dg.nn.Dropout(0.25)]
        if extra_layer:
            layers += [dg.nn.Linear(hidden, hidden)]
        self.body = dg.nn.Sequential(*layers, dg.nn.Linear(hidden, 3))
        self.unused = dg.nn.Linear(2, 2)

    def forward(self, idx):
        return self.body(self.emb(idx))


def batch(step):
    """The data of a step: a pure function of the step number."""
    r = np.random.default_rng(1000 + step)
    return r.integers(0, VOCAB, BATCH), r.integers(0, 3, BATCH)


def setup(seed=0, **kw):
    dg.manual_seed(seed)
    model = Net(**kw)
    opt = dg.optim.Adam(model.parameters(), lr=0.02, weight_decay=0.01)
    sched = dg.optim.WarmupCosineLR(opt, warmup_steps=2, total_steps=20, min_lr=1e-3)
    return model, opt, sched


def train(model, opt, sched, steps, start):
    for step in range(start, start + steps):
        idx, target = batch(step)
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(idx), target)
            loss.backward()
        opt.step()
        opt.zero_grad()
        sched.step()


def params_of(model):
    return {n: p.numpy() for n, p in model.named_parameters()}


def assert_same_params(model, expected):
    got = params_of(model)
    assert list(got) == list(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def assert_same_opt_state(got, expected):
    assert got["param_names"] == expected["param_names"]
    assert got["param_groups"] == expected["param_groups"]
    assert set(got["state"]) == set(expected["state"])
    for i, entry in expected["state"].items():
        assert set(got["state"][i]) == set(entry), i
        for k, v in entry.items():
            np.testing.assert_array_equal(got["state"][i][k], v, err_msg=f"{i}/{k}")


def dropout_state(model):
    return model.extra_state()


@pytest.fixture
def saved(tmp_path, device):
    """A checkpoint after 3 training steps, and what it should restore."""
    model, opt, sched = setup()
    train(model, opt, sched, 3, 0)
    path = tmp_path / "ck.safetensors"
    extra = {"epoch": 3, "note": "résumé", "nested": {"losses": [1.5, 0.25]}}
    dg.save_checkpoint(path, model, opt, sched, extra=extra)
    next_init = dg.nn.Linear(3, 4).weight.numpy()    # what the generator draws next
    return dict(path=path, model=model, opt=opt, sched=sched, extra=extra,
                params=params_of(model), opt_state=opt.state_dict(),
                sched_state=sched.state_dict(), dropout=dropout_state(model),
                next_init=next_init)


def test_round_trip_bit_for_bit(saved):
    assert saved["dropout"] == {"body.3": {"seed": saved["model"].body[3].seed, "step": 3}}
    # the never-used layer has no optimizer state; the others have taken 3 steps
    assert {e["step"] for e in saved["opt_state"]["state"].values()} == {3}
    assert len(saved["opt_state"]["state"]) == len(saved["params"]) - 2
    model, opt, sched = setup(seed=99)                # different initial values everywhere
    assert not np.array_equal(model.emb.weight.numpy(), saved["params"]["emb.weight"])
    extra = dg.load_checkpoint(saved["path"], model, opt, sched)
    assert extra == saved["extra"]
    assert_same_params(model, saved["params"])
    assert_same_opt_state(opt.state_dict(), saved["opt_state"])
    assert opt.lr == saved["opt"].lr
    assert sched.state_dict() == saved["sched_state"]
    assert dropout_state(model) == saved["dropout"]
    # dualgrad's generator is restored too: the next initialisation repeats
    np.testing.assert_array_equal(dg.nn.Linear(3, 4).weight.numpy(), saved["next_init"])


def test_a_resume_with_parameter_groups_continues_bit_for_bit(tmp_path, device):
    def grouped(seed):
        dg.manual_seed(seed)
        model = Net()
        params = list(model.parameters())
        opt = dg.optim.NAdam([{"params": params[:2], "lr": 0.05, "weight_decay": 0.01},
                              {"params": params[2:], "decoupled_weight_decay": True}],
                             lr=0.02)
        return model, opt, dg.optim.ExponentialLR(opt, gamma=0.9)
    model, opt, sched = grouped(0)
    train(model, opt, sched, 3, 0)
    path = tmp_path / "ck.safetensors"
    dg.save_checkpoint(path, model, opt, sched)
    train(model, opt, sched, 4, 3)
    resumed, opt2, sched2 = grouped(5)
    dg.load_checkpoint(path, resumed, opt2, sched2)
    assert opt2.hyperparameters()[0]["lr"] == pytest.approx(0.05 * 0.9 ** 3)
    train(resumed, opt2, sched2, 4, 3)
    assert opt2.hyperparameters() == opt.hyperparameters()
    if device == "cpu":
        assert_same_params(resumed, params_of(model))
    assert_same_opt_state(opt2.state_dict(), opt.state_dict())


def test_resume_continues_bit_for_bit(tmp_path, device):
    model, opt, sched = setup()
    train(model, opt, sched, 3, 0)
    path = tmp_path / "ck.safetensors"
    dg.save_checkpoint(path, model, opt, sched)
    train(model, opt, sched, 4, 3)                    # never stopped
    resumed, opt2, sched2 = setup(seed=5)
    dg.load_checkpoint(path, resumed, opt2, sched2)
    train(resumed, opt2, sched2, 4, 3)
    assert dropout_state(resumed) == dropout_state(model)
    assert opt2.lr == opt.lr
    if device == "cpu":
        assert_same_params(resumed, params_of(model))
        assert_same_opt_state(opt2.state_dict(), opt.state_dict())
    else:
        for name, value in params_of(model).items():
            np.testing.assert_allclose(params_of(resumed)[name], value, rtol=1e-5, atol=1e-6)


def snapshot(model, opt):
    return params_of(model), opt.state_dict(), dropout_state(model), opt.lr


def assert_unchanged(model, opt, snap):
    params, opt_state, drop, lr = snap
    assert_same_params(model, params)
    assert_same_opt_state(opt.state_dict(), opt_state)
    assert dropout_state(model) == drop
    assert opt.lr == lr


def trained_target(**kw):
    model, opt, sched = setup(seed=7, **kw)
    train(model, opt, sched, 2, 50)          # so that there is optimizer state to protect
    return model, opt, sched


@pytest.mark.parametrize("kw", [dict(hidden=5), dict(extra_layer=True)],
                         ids=["other_width", "extra_layer"])
def test_other_architecture_refused_unchanged(saved, kw):
    model, opt, sched = trained_target(**kw)
    snap = snapshot(model, opt)
    draw_state = dg.api.random.get_state()
    with pytest.raises(dg.CheckpointError) as info:
        dg.load_checkpoint(saved["path"], model, opt, sched)
    message = str(info.value)
    ours, theirs = snap[0], saved["params"]
    absent = set(ours) ^ set(theirs)
    if absent:                 # names that only one side has: all of them are named
        assert all(name in message for name in absent), message
    else:                      # same names: a parameter whose shape differs is named
        reshaped = [n for n in ours if ours[n].shape != theirs[n].shape]
        assert any(f"'{n}'" in message for n in reshaped), message
    assert_unchanged(model, opt, snap)
    assert dg.api.random.get_state() == draw_state


def test_other_optimizer_refused_unchanged(saved):
    dg.manual_seed(3)
    model = Net()
    opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    snap = snapshot(model, opt)
    with pytest.raises(dg.CheckpointError) as info:
        dg.load_checkpoint(saved["path"], model, opt)
    assert "Adam" in str(info.value) and "SGD" in str(info.value)
    assert_unchanged(model, opt, snap)


def test_missing_optimizer_state_refused(tmp_path, device):
    model, opt, _ = setup()
    path = tmp_path / "model_only.safetensors"
    dg.save_checkpoint(path, model)
    target, opt2, _ = trained_target()
    snap = snapshot(target, opt2)
    with pytest.raises(dg.CheckpointError):
        dg.load_checkpoint(path, target, opt2)
    assert_unchanged(target, opt2, snap)
    dg.load_checkpoint(path, target)                  # the model alone does load
    assert_same_params(target, params_of(model))


def data_offset(blob):
    (n,) = struct.unpack("<Q", blob[:8])
    return 8 + n


@pytest.mark.parametrize("keep", ["4 bytes", "header", "half", "all but one"])
def test_truncated_file_refused(saved, keep):
    blob = saved["path"].read_bytes()
    start = data_offset(blob)
    cut = {"4 bytes": 4, "header": start // 2, "half": (start + len(blob)) // 2,
           "all but one": len(blob) - 1}[keep]
    bad = saved["path"].with_name("bad.safetensors")
    bad.write_bytes(blob[:cut])
    model, opt, sched = trained_target()
    snap = snapshot(model, opt)
    with pytest.raises(dg.CheckpointError):
        dg.load_checkpoint(bad, model, opt, sched)
    assert_unchanged(model, opt, snap)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_flipped_data_byte_refused(saved, where):
    blob = bytearray(saved["path"].read_bytes())
    start = data_offset(blob)
    pos = {"first": start, "middle": (start + len(blob)) // 2, "last": len(blob) - 1}[where]
    blob[pos] ^= 0x01
    bad = saved["path"].with_name("bad.safetensors")
    bad.write_bytes(bytes(blob))
    model, opt, sched = trained_target()
    snap = snapshot(model, opt)
    with pytest.raises(dg.CheckpointError):
        dg.load_checkpoint(bad, model, opt, sched)
    assert_unchanged(model, opt, snap)


def test_tampered_metadata_refused(saved):
    # a still-valid JSON header whose metadata says something else ("epoch" -> "dpoch")
    blob = bytearray(saved["path"].read_bytes())
    pos = blob.index(b"epoch", 0, data_offset(blob))
    blob[pos] ^= 0x01
    bad = saved["path"].with_name("bad.safetensors")
    bad.write_bytes(bytes(blob))
    json.loads(bytes(blob[8:data_offset(blob)]))      # the header itself still parses
    model, opt, sched = trained_target()
    with pytest.raises(dg.CheckpointError):
        dg.load_checkpoint(bad, model, opt, sched)


def test_missing_file_refused(tmp_path):
    # as open() and torch.load: FileNotFoundError (and ours), naming the argument
    model, opt, _ = setup()
    with pytest.raises(FileNotFoundError, match="load_checkpoint: argument 'path'") as info:
        dg.load_checkpoint(tmp_path / "absent.safetensors", model, opt)
    assert isinstance(info.value, dg.DualgradError)
    assert info.value.filename == str(tmp_path / "absent.safetensors")


def test_a_save_where_it_cannot_go_is_refused_before_anything_is_written(tmp_path):
    model, opt, _ = setup()
    with pytest.raises(FileNotFoundError, match="argument 'path' is in a directory that "
                       "does not exist"):
        dg.save_checkpoint(tmp_path / "missing" / "ck.safetensors", model, opt)
    with pytest.raises(OSError, match="argument 'path' is a directory") as info:
        dg.save_checkpoint(tmp_path, model, opt)
    assert info.value.errno == errno.EISDIR and isinstance(info.value, dg.DualgradError)
    with pytest.raises(TypeError, match="argument 'extra' holds a value JSON cannot hold"):
        dg.save_checkpoint(tmp_path / "ck.safetensors", model, opt, extra={"f": print})
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Atomic writes

def test_failed_save_to_missing_directory_leaves_nothing(tmp_path):
    model, opt, _ = setup()
    target = tmp_path / "no_such_dir" / "ck.safetensors"
    with pytest.raises((OSError, dg.CheckpointError)):
        dg.save_checkpoint(target, model, opt)
    assert list(tmp_path.iterdir()) == []


def test_failed_save_keeps_previous_checkpoint(saved, monkeypatch):
    path, folder = saved["path"], saved["path"].parent
    original = path.read_bytes()
    model, opt, sched = trained_target()

    def crash(fd):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="simulated crash"):
        dg.save_checkpoint(path, model, opt, sched)
    monkeypatch.undo()
    # a save whose input cannot be serialised fails before writing anything, too
    with pytest.raises(TypeError):
        dg.save_checkpoint(path, model, opt, sched, extra={"bad": object()})
    assert sorted(p.name for p in folder.iterdir()) == [path.name]   # no temporary file
    assert path.read_bytes() == original
    fresh, opt2, sched2 = setup(seed=4)
    assert dg.load_checkpoint(path, fresh, opt2, sched2) == saved["extra"]
    assert_same_params(fresh, saved["params"])


def test_save_replaces_target_only_by_rename(saved, monkeypatch):
    path, folder = saved["path"], saved["path"].parent
    original = path.read_bytes()
    model, opt, sched = trained_target()
    real_replace, real_fsync = os.replace, os.fsync
    events = []

    def spy_fsync(fd):
        events.append("fsync")
        return real_fsync(fd)

    def spy_replace(src, dst):
        events.append("replace")
        assert os.path.abspath(dst) == str(path)
        assert os.path.dirname(os.path.abspath(src)) == str(folder)   # same file system
        assert path.read_bytes() == original           # the target was not written to
        dg.api.io.read_checkpoint(src)                 # the new file is already complete
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", spy_fsync)
    monkeypatch.setattr(os, "replace", spy_replace)
    dg.save_checkpoint(path, model, opt, sched)
    monkeypatch.undo()
    assert events[:2] == ["fsync", "replace"]          # flushed to disk before the rename
    assert sorted(p.name for p in folder.iterdir()) == [path.name]
    assert path.read_bytes() != original
    fresh, opt2, sched2 = setup(seed=4)
    dg.load_checkpoint(path, fresh, opt2, sched2)
    assert_same_params(fresh, params_of(model))


# ---------------------------------------------------------------------------------------------
# Crashes and fresh processes

SAVER = """
import os, sys, time
import numpy as np
import dualgrad as dg

path, stop = sys.argv[1], sys.argv[2]
model = dg.nn.Linear(1024, 2048)           # 8 MiB of weights: a save takes a while


def halt(*args, **kwargs):
    print("inside", flush=True)
    time.sleep(600)                          # killed here


for n in range(1, 10 ** 6):
    dg.residency.write_resident(model.weight, np.full((2048, 1024), n, np.float32))
    if n == 2 and stop == "fsync":           # the data is written, not yet flushed or renamed
        os.fsync = halt
    if n == 2 and stop == "write":           # half of the data is written
        real_fdopen = os.fdopen

        def fdopen(fd, mode):
            f = real_fdopen(fd, mode)
            real_write = f.write
            f.write = lambda blob: (real_write(blob[:len(blob) // 2]), f.flush(), halt())
            return f

        os.fdopen = fdopen
    dg.save_checkpoint(path, model, extra={"n": n})
    print(n, flush=True)
"""


def start_saver(path, stop):
    return subprocess.Popen([sys.executable, "-c", SAVER, str(path), stop], env=child_env(),
                            stdout=subprocess.PIPE, text=True)


def assert_complete_checkpoint(path):
    """The file verifies, loads, and holds one save's values throughout; returns its n."""
    dg.api.io.read_checkpoint(path)
    model = dg.nn.Linear(1024, 2048)
    n = dg.load_checkpoint(path, model)["n"]
    np.testing.assert_array_equal(model.weight.numpy(), np.full((2048, 1024), n, np.float32))
    return n


@pytest.mark.parametrize("stop", ["write", "fsync"])
def test_a_save_killed_midway_leaves_the_previous_checkpoint(tmp_path, stop):
    path = tmp_path / "ck.safetensors"
    child = start_saver(path, stop)
    try:
        assert child.stdout.readline().strip() == "1"        # the first save is complete
        assert child.stdout.readline().strip() == "inside"   # the second one is stopped in it
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    leftovers = [p for p in tmp_path.iterdir() if p != path]
    assert [p.name for p in leftovers] == [f".{path.name}.{child.pid}.tmp"]   # cut off
    assert assert_complete_checkpoint(path) == 1             # the target is the first save
    if stop == "write":
        with pytest.raises(dg.CheckpointError):
            dg.api.io.read_checkpoint(leftovers[0])          # the half-written second save
    else:
        assert assert_complete_checkpoint(leftovers[0]) == 2  # whole, but never renamed
    # the next save of the same path removes what the killed one left
    dg.save_checkpoint(path, dg.nn.Linear(1024, 2048), extra={"n": 3})
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_saves_killed_at_random_moments_leave_a_complete_checkpoint(tmp_path):
    path = tmp_path / "ck.safetensors"
    rng = np.random.default_rng(0)
    for _ in range(4):
        child = start_saver(path, "none")
        try:
            child.stdout.readline()                             # at least one save is done
            time.sleep(rng.uniform(0.0, 0.3))
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
        assert assert_complete_checkpoint(path) >= 1


RESUMER = """
import sys
import dualgrad as dg
sys.path.insert(0, "tests")
import test_checkpoint as tc

saved, out, device = sys.argv[1:]
dg.ag_device(device)
model, opt, sched = tc.setup(seed=5)         # other initial values: all must come from the file
dg.load_checkpoint(saved, model, opt, sched)
tc.train(model, opt, sched, 4, 3)
dg.save_checkpoint(out, model, opt, sched)
"""


@pytest.mark.exhaustive
def test_resume_in_a_fresh_process_continues_exactly(tmp_path, device):
    # Adam with weight decay, a warm-up cosine schedule and dropout: every piece of state a
    # resumed run needs comes through the file.
    model, opt, sched = setup()
    train(model, opt, sched, 3, 0)
    saved, out = tmp_path / "at3.safetensors", tmp_path / "at7.safetensors"
    dg.save_checkpoint(saved, model, opt, sched)
    train(model, opt, sched, 4, 3)                    # the run that never stopped
    child = subprocess.run([sys.executable, "-c", RESUMER, str(saved), str(out), device],
                           cwd=str(ROOT), capture_output=True, text=True, timeout=300,
                           env=child_env())
    assert child.returncode == 0, child.stderr
    resumed, opt2, sched2 = setup(seed=6)
    dg.load_checkpoint(out, resumed, opt2, sched2)
    assert dropout_state(resumed) == dropout_state(model)
    assert sched2.state_dict() == sched.state_dict() and opt2.lr == opt.lr
    # the same kernels on the same device: bit for bit on the gpu too
    assert_same_params(resumed, params_of(model))
    assert_same_opt_state(opt2.state_dict(), opt.state_dict())
