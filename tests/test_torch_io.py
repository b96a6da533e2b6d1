"""load_torch_state_dict: PyTorch state_dicts in the safetensors format (written here byte
by byte, so no PyTorch is needed) land in the layers of the same names, every dtype
converted; bad files and misfits are refused before any weight changes."""
import json
import struct

import numpy as np
import pytest

import dualgrad as dg
from dualgrad import nn

_CODES = {np.dtype("<f8"): "F64", np.dtype("<f4"): "F32", np.dtype("<f2"): "F16",
          np.dtype("<i8"): "I64", np.dtype("<i4"): "I32"}


def write_safetensors(path, tensors: dict, bfloat16=()) -> None:
    """The safetensors layout: header length, JSON header, row-major bytes."""
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, value in tensors.items():
        value = np.array(value, order="C")           # (0-d stays 0-d)
        if name in bfloat16:          # the upper half of each float32 (exact for these)
            raw, code = (value.astype(np.float32).view(np.uint32) >> 16).astype("<u2"), "BF16"
        else:
            raw, code = value, _CODES[value.dtype]
        data = raw.tobytes()
        header[name] = {"dtype": code, "shape": list(value.shape),
                        "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def model():
    dg.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(12, 4))


def torch_state():
    """A state_dict as PyTorch names and types it for that model: values known."""
    ramp = (lambda *shape: (np.arange(np.prod(shape)).reshape(shape) / 8 - 1))
    return {"0.weight": ramp(3, 2, 3, 3).astype(np.float32),
            "0.bias": np.array([0.5, -0.5, 0.25], np.float64),
            "1.weight": np.array([1.0, 2.0, 3.0], np.float16),
            "1.bias": np.array([0.0, 0.125, -0.125], np.float32),
            "1.running_mean": np.array([0.1, 0.2, 0.3], np.float32),
            "1.running_var": np.array([1.5, 2.5, 3.5], np.float32),
            "1.num_batches_tracked": np.array(7, np.int64),
            "4.weight": ramp(4, 12).astype(np.float32),
            "4.bias": np.array([1.0, -2.0, 0.5, 0.0], np.float32)}


def test_a_pytorch_state_dict_loads_by_name(device, tmp_path):
    state = torch_state()
    write_safetensors(tmp_path / "w.safetensors", state, bfloat16=("4.weight",))
    m = model()
    dg.load_torch_state_dict(m, tmp_path / "w.safetensors")
    got = m.state_dict()
    assert list(got) == list(state)
    for name, value in state.items():
        assert got[name].dtype == (np.int32 if value.dtype.kind == "i" else np.float32), name
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    # the loaded model computes with them: eval mode uses the running statistics
    x = np.random.default_rng(1).standard_normal((2, 2, 4, 4)).astype(np.float32)
    y = m.eval()(dg.ag_tensor(x)).numpy()
    conv = np.stack([np.einsum("ncij,ocij->no", x[:, :, r:r + 3, c:c + 3], state["0.weight"])
                     for r in range(2) for c in range(2)], -1) + state["0.bias"][:, None]
    bn = (conv - state["1.running_mean"][:, None]) / np.sqrt(
        state["1.running_var"][:, None] + 1e-5) * state["1.weight"][:, None].astype(
        np.float64) + state["1.bias"][:, None]
    want = np.maximum(bn, 0).reshape(2, 12) @ state["4.weight"].T + state["4.bias"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_the_reader_gives_every_tensor(tmp_path):
    state = torch_state()
    write_safetensors(tmp_path / "w.safetensors", state)
    read = dg.read_safetensors(tmp_path / "w.safetensors")
    assert read.keys() == state.keys()
    for name, value in state.items():
        assert read[name].dtype == value.dtype and np.array_equal(read[name], value), name


def corrupt(path, how):
    data = bytearray(path.read_bytes())
    if how == "truncated":
        data = data[:len(data) - 8]
    elif how == "no header":
        data[8:12] = b"\xff\xfe\x00\x01"
    elif how == "short":
        data = data[:5]
    path.write_bytes(bytes(data))


# (stage "state": the state changed before it is written; "file": the file after)
@pytest.mark.parametrize("stage, change, error, pattern", [
    ("state", lambda s, p: s.pop("1.running_var"), dg.CheckpointError,
     r"missing.*running_var"),
    ("state", lambda s, p: s.update({"extra.weight": np.ones(2, np.float32)}),
     dg.CheckpointError, r"unexpected.*extra\.weight"),
    ("state", lambda s, p: s.update({"4.weight": np.ones((4, 11), np.float32)}),
     dg.CheckpointError, r"4\.weight"),
    ("state", lambda s, p: s.update({"1.num_batches_tracked": np.array(2 ** 40, np.int64)}),
     dg.CheckpointError, r"int32's range"),
    ("file", lambda s, p: corrupt(p, "truncated"), dg.CheckpointError, r"do not hold"),
    ("file", lambda s, p: corrupt(p, "no header"), dg.CheckpointError, r"no JSON header"),
    ("file", lambda s, p: corrupt(p, "short"), dg.CheckpointError, r"shorter than its header"),
    ("file", lambda s, p: p.unlink(), dg.CheckpointNotFoundError, r"w\.safetensors"),
], ids=["missing", "unexpected", "shape", "int range", "truncated", "no header", "short",
        "no file"])
def test_misfits_and_bad_files_change_nothing(device, tmp_path, stage, change, error, pattern):
    path = tmp_path / "w.safetensors"
    state = torch_state()
    if stage == "state":
        change(state, path)
    write_safetensors(path, state)
    if stage == "file":
        change(state, path)
    m = model()
    before = m.state_dict()
    with pytest.raises(error, match=pattern):
        dg.load_torch_state_dict(m, path)
    for name, value in m.state_dict().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_bad_arguments_name_themselves():
    with pytest.raises(dg.ArgumentTypeError, match="argument 'model'"):
        dg.load_torch_state_dict("model", {})
    with pytest.raises(dg.ArgumentTypeError, match="argument 'source'"):
        dg.load_torch_state_dict(model(), 3)
