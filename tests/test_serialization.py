"""dg.save / dg.load (dualgrad/api/serialization.py): state dicts, tensors and arrays round
trip onto the active backend; a weights-only load refuses anything that could run code."""
from __future__ import annotations

import collections
import io
import os

import numpy as np
import pytest

import dualgrad as dg


class _Runs:
    def __reduce__(self):
        return (os.getcwd, ())


def test_a_state_dict_round_trips(device, tmp_path):
    dg.manual_seed(3)
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4))
    path = tmp_path / "model.pt"
    dg.save(model.state_dict(), path)
    dg.manual_seed(4)
    other = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4))
    other.load_state_dict(dg.load(path))
    for (name, a), b in zip(model.state_dict().items(), other.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_tensors_arrays_and_containers_round_trip(device):
    obj = {"t": dg.ag_tensor(np.arange(3, dtype=np.float32)), "p": dg.ag_param(np.ones(2)),
           "b": dg.ones(2).bfloat16(), "i": dg.tensor([1, 2]), "a": np.ones(2, np.float16),
           "o": collections.OrderedDict(x=1), "misc": [1, 2.5, "s", None, (3, 4)]}
    buffer = io.BytesIO()
    dg.save(obj, buffer)
    buffer.seek(0)
    back = dg.load(buffer, map_location="cpu")
    assert isinstance(back["p"], dg.Parameter) and back["b"].dtype == dg.bfloat16
    np.testing.assert_array_equal(back["t"].numpy(), [0, 1, 2])
    assert back["i"].dtype == np.int32 and back["a"].dtype == np.float16
    assert back["o"] == obj["o"] and back["misc"] == obj["misc"]
    assert (back["t"].ptr is not None) == (device == "gpu")       # on the active backend


def test_a_weights_only_load_refuses_code(tmp_path):
    path = tmp_path / "evil.pt"
    dg.save({"x": _Runs()}, path)
    with pytest.raises(dg.CheckpointError, match=r"refuses .*weights_only=False"):
        dg.load(path)
    assert dg.load(path, weights_only=False)["x"] == os.getcwd()    # (trusted: it runs)


def test_load_errors(tmp_path):
    with pytest.raises(dg.CheckpointNotFoundError, match=r"^load: no file"):
        dg.load(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(dg.CheckpointError, match=r"^load: the file is not one save\(\) wrote"):
        dg.load(tmp_path / "junk.pt")
    with pytest.raises(dg.ArgumentTypeError, match=r"^save: argument 'f'"):
        dg.save({}, 3)
