"""torch.cuda's and torch.device's common names: the device-choosing lines of PyTorch
programs run as written and pick where dualgrad's tensors live."""
import numpy as np
import pytest

import dualgrad as torch
import dualgrad.nn as nn
from dualgrad.cuda.amp import GradScaler, autocast


def test_the_device_choosing_line_picks_the_active_backend(device):
    # device = torch.device("cuda" if torch.cuda.is_available() else "cpu"), as written
    assert torch.cuda.is_available() == (device == "gpu")
    where = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert where.type == ("cuda" if device == "gpu" else "cpu") and where.index is None
    model = nn.Linear(3, 2).to(where)
    x = torch.randn(4, 3, device=where)
    y = model(x.to(where))
    torch.cuda.synchronize()
    assert y.shape == (4, 2) and torch.cuda.device_count() == len(torch.devices())
    assert torch.cuda.is_bf16_supported()
    if device == "gpu":
        assert torch.cuda.memory_allocated() > 0
        assert torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated()
        assert torch.cuda.get_device_name() in [d["name"] for d in torch.devices()]
    else:
        assert torch.cuda.memory_allocated() == 0 and torch.cuda.max_memory_allocated() == 0
        with pytest.raises(torch.InvalidValueError, match=r"argument 'device'"):
            x.to(torch.device("cuda"))          # (tensors live on the active backend)


def test_a_tensors_device_has_type_and_index_as_pytorchs(device):
    # x.device.type, as PyTorch programs read it (autocast(device_type=x.device.type)); the
    # name itself is still the backend's, equal to the string
    x = torch.ones(2)
    assert x.device == device and x.device.type == device and x.device.index is None
    assert isinstance(x.device, torch.device) and repr(x.device) == f"device(type='{device}')"
    assert torch.zeros(1, device=x.device).device == device
    with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16):
        assert (x @ torch.ones(2, 2)).dtype == torch.bfloat16


def test_synchronize_submits_the_queued_work(device):
    x = torch.ag_tensor(np.arange(1 << 16, dtype=np.float32))
    torch.reset_transfer_stats()
    total = torch.sum(torch.exp(x * 0.0))       # recorded on the gpu, not yet submitted
    queued = torch.transfer_stats()["submits"]
    torch.cuda.synchronize()
    assert torch.transfer_stats()["submits"] == (queued + 1 if device == "gpu" else 0)
    assert total.item() == float(1 << 16)


def test_seeds_and_memory_statistics_as_pytorchs(gpu):
    torch.cuda.manual_seed_all(5)
    a = torch.rand(3).numpy()
    torch.cuda.manual_seed(5)
    np.testing.assert_array_equal(torch.rand(3).numpy(), a)
    keep = torch.zeros(1 << 18)                 # 1 MiB held
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated() >= 1 << 20
    del keep


def test_devices_parse_as_torch_device():
    d = torch.device("cuda", 1)
    assert d == "cuda:1" and (d.type, d.index) == ("cuda", 1)
    assert repr(d) == "device(type='cuda', index=1)"
    assert torch.device("CPU").type == "cpu" and torch.device(d) is d
    assert torch.device("gpu:0").index == 0
    with pytest.raises(torch.InvalidValueError, match=r"^device: argument 'type' is 'tpu'"):
        torch.device("tpu")
    with pytest.raises(torch.InvalidValueError, match=r"^device: argument 'index'"):
        torch.device("cuda:0", 1)
    with pytest.raises(torch.ArgumentTypeError, match=r"^device: argument 'index'"):
        torch.device("cuda", -1)


def test_cuda_amp_autocast_is_float16_by_default(gpu):
    layer = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with autocast():
        assert layer(x).dtype == np.float16
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16
    with autocast(enabled=False):
        assert layer(x).dtype == np.float32
    assert GradScaler is torch.GradScaler
