"""float16 and bfloat16 tensors: made, converted and read back on both backends, rounded
as NumPy and ml_dtypes round; refused by the ops, which take float32 (the differential
check "convert16" holds the two backends' conversions together bit for bit)."""
import copy
import pickle

import ml_dtypes
import numpy as np
import pytest

import dualgrad as dg

LOW = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
NAMES = {"float16": LOW[0], "bfloat16": LOW[1]}


def _values():
    """Ties, the edges of each type's range, subnormals, specials; odd length."""
    return np.array([1.0, 1.00390625, 1.01171875, 1 + 2.0**-11, 1 + 3 * 2.0**-11, -0.0,
                     np.nan, np.inf, -np.inf, 65504, 65519.99, 65520, 3.3895e38, 3.4e38,
                     2.0**-24, 2.0**-25, 1.5 * 2.0**-25, 1e-40, -1e-45, 0.1, -7.25],
                    np.float32)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, signed zeros told apart, NaN equal to NaN."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32) * ~np.isnan(a),
                                                 b.view(np.uint32) * ~np.isnan(b)) and \
        np.array_equal(np.isnan(a), np.isnan(b))


@pytest.mark.parametrize("name", NAMES)
def test_conversion_rounds_to_nearest_even_and_widens_exactly(device, name):
    x = _values()
    with np.errstate(over="ignore"):
        want = x.astype(NAMES[name])
    low = dg.ag_tensor(x).to(name)
    assert low.dtype == NAMES[name] and low.shape == x.shape
    got = low.numpy()
    assert got.dtype == NAMES[name]
    assert _same(got, want)
    back = low.float()
    assert back.dtype == np.float32
    assert _same(back.numpy(), want.astype(np.float32))
    # straight from host values, rounded once from float32, as .to() does
    assert _same(dg.ag_tensor(x, dtype=name).numpy(), want)


def test_the_methods_and_the_names(device):
    t = dg.ag_tensor(np.arange(5, dtype=np.float32) / 3)
    assert t.half().dtype == np.float16 and t.bfloat16().dtype == LOW[1]
    assert t.to(np.float16).dtype == np.float16
    assert t.astype("half").dtype == np.float16
    assert dg.bfloat16 == LOW[1] and dg.float16 == LOW[0] and dg.float32 == np.float32
    assert t.to(dg.bfloat16).to(dg.float32).dtype == np.float32


@pytest.mark.parametrize("n", [0, 1, 2, 3, 1025])
def test_every_length_converts_including_odd_ones(device, n):
    """Two 16-bit values share a 32-bit word on the device: odd lengths and the empty
    tensor keep their last value and their neighbours."""
    x = (np.arange(n, dtype=np.float32) - n / 2) * 0.37
    for low in LOW:
        t = dg.ag_tensor(x).to(low)
        assert _same(t.numpy(), x.astype(low))
        assert _same(t.float().numpy(), x.astype(low).astype(np.float32))


def test_the_ops_refuse_16_bit_tensors_and_say_what_to_do(device):
    b = dg.ag_tensor(np.ones((2, 3), np.float32)).bfloat16()
    f = dg.ag_tensor(np.ones((2, 3), np.float32))
    for call in (lambda: b + f, lambda: dg.exp(b), lambda: b @ f.T, lambda: b.sum(),
                 lambda: b.reshape(3, 2), lambda: b[0], lambda: b == f,
                 lambda: dg.concat([b, b]), lambda: dg.softmax(b, dim=1)):
        with pytest.raises(dg.ArgumentTypeError, match=r"bfloat16 tensor.*\.float\(\)"):
            call()


def test_conversions_other_than_from_and_to_float32_are_refused(device):
    i = dg.ag_tensor(np.arange(3), dtype="int32")
    with pytest.raises(dg.ArgumentTypeError, match="convert through float32"):
        i.to("bfloat16")
    with pytest.raises(dg.ArgumentTypeError, match="convert through float32"):
        dg.ag_tensor(np.ones(2, np.float32)).half().to("int32")
    with pytest.raises(dg.ArgumentTypeError, match="convert through float32"):
        dg.ag_tensor(np.ones(2, np.float32)).half().to("bfloat16")


def test_no_gradient_flows_into_16_bit_tensors(device):
    w = dg.ag_param(np.ones(3, np.float32))
    with dg.with_grad_tape():
        with pytest.raises(dg.InvalidValueError, match="no_grad"):
            w.to("bfloat16")
    with dg.no_grad():
        assert w.to("bfloat16").dtype == LOW[1]
    with pytest.raises(dg.InvalidValueError, match="requires_grad"):
        dg.ag_tensor(np.ones(2), requires_grad=True, dtype="float16")
    with pytest.raises(dg.ArgumentTypeError, match="float32 or float64"):
        dg.ag_param(np.ones(2), dtype="bfloat16")


def test_a_16_bit_tensor_prints_copies_pickles_and_moves(device):
    x = _values()
    with np.errstate(over="ignore"):
        want = x.astype(LOW[1])
    t = dg.ag_tensor(x).bfloat16()
    assert "dtype=bfloat16" in repr(t)
    assert _same(copy.deepcopy(t).numpy(), want)
    assert _same(pickle.loads(pickle.dumps(t)).numpy(), want)
    assert float(dg.ag_tensor(np.array([2.5], np.float32)).half().item()) == 2.5


def test_a_16_bit_tensor_survives_leaving_the_device(gpu):
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    t = dg.ag_tensor(x).to("float16")
    dg.ag_device("cpu")                          # rescued into host memory
    assert _same(t.numpy(), x.astype(np.float16))
    dg.ag_device("gpu")                          # and moved back once used
    assert _same(t.float().numpy(), x.astype(np.float16).astype(np.float32))
