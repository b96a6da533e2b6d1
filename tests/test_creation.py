"""Tensor factories (zeros, ones, full, *_like, arange, linspace, eye, rand, randn): PyTorch's
values and shapes, the same bits on both backends, seeded draws, and errors that name the
argument."""
import numpy as np
import pytest

import dualgrad as dg

F32 = np.float32

# (call, NumPy's expected value): the values and dtypes PyTorch gives (its int64: int32).
CASES = {
    "zeros": (lambda: dg.zeros(2, 3), np.zeros((2, 3), F32)),
    "zeros tuple": (lambda: dg.zeros((4,)), np.zeros(4, F32)),
    "zeros scalar": (lambda: dg.zeros(()), np.zeros((), F32)),
    "ones": (lambda: dg.ones(1, 2, 1), np.ones((1, 2, 1), F32)),
    "ones empty": (lambda: dg.ones(0, 3), np.ones((0, 3), F32)),
    "full": (lambda: dg.full((2, 2), -1.5), np.full((2, 2), -1.5, F32)),
    "full inf": (lambda: dg.full(3, float("inf")), np.full(3, np.inf, F32)),
    "arange n": (lambda: dg.arange(5), np.arange(5, dtype=np.int32)),
    "arange step": (lambda: dg.arange(1, 2, 0.25), np.array([1, 1.25, 1.5, 1.75], F32)),
    "arange down": (lambda: dg.arange(3, -3, -2), np.array([3, 1, -1], np.int32)),
    "arange empty": (lambda: dg.arange(2, 2), np.zeros(0, np.int32)),
    "arange float end": (lambda: dg.arange(3.0), np.arange(3, dtype=F32)),
    "arange float dtype": (lambda: dg.arange(3, dtype=dg.float32), np.arange(3, dtype=F32)),
    "arange tenths": (lambda: dg.arange(0, 1, 0.1), (np.arange(10) * 0.1).astype(F32)),
    "linspace": (lambda: dg.linspace(-1, 1, 5), np.array([-1, -0.5, 0, 0.5, 1], F32)),
    "linspace one": (lambda: dg.linspace(3, 7, 1), np.array([3], F32)),
    "eye": (lambda: dg.eye(3), np.eye(3, dtype=F32)),
    "eye wide": (lambda: dg.eye(2, 4), np.eye(2, 4, dtype=F32)),
}


@pytest.mark.parametrize("name", CASES)
def test_factories_give_torchs_values(device, name):
    make, expected = CASES[name]
    t = make()
    assert isinstance(t, dg.Tensor) and t.dtype == expected.dtype and t.shape == expected.shape
    assert np.array_equal(t.numpy(), expected)


def test_like_factories_take_shape_and_dtype_of_their_input(device):
    x = dg.ag_tensor(np.arange(6, dtype=F32).reshape(2, 3))
    assert np.array_equal(dg.zeros_like(x).numpy(), np.zeros((2, 3), F32))
    assert np.array_equal(dg.ones_like(x).numpy(), np.ones((2, 3), F32))
    assert np.array_equal(dg.full_like(x, 7).numpy(), np.full((2, 3), 7, F32))
    with pytest.raises(dg.ArgumentTypeError, match="zeros_like: argument 'input'"):
        dg.zeros_like(np.zeros(3))


def test_an_int32_arange_indexes_and_embeds_as_torchs(device):
    # torch.arange of ints gives integers, so it picks rows and embeds positions
    x = dg.ag_tensor(np.arange(12, dtype=F32).reshape(3, 4))
    assert dg.arange(3).dtype == np.int32
    np.testing.assert_array_equal(x[dg.arange(3), dg.tensor([3, 0, 1])].numpy(), [3, 4, 9])
    assert dg.nn.Embedding(5, 2)(dg.arange(5)).shape == (5, 2)
    np.testing.assert_array_equal((dg.arange(4) * 0.5).numpy(), [0, 0.5, 1, 1.5])
    np.testing.assert_array_equal(dg.arange(np.int64(2), 5).numpy(), [2, 3, 4])


def test_float64_on_the_cpu():
    assert dg.arange(0, 1, 0.1, dtype="float64").numpy()[3] == 0.30000000000000004
    assert dg.zeros_like(dg.ones(2, dtype="float64")).dtype == np.float64


def test_seeded_draws_repeat_and_match_across_backends(device):
    dg.manual_seed(11)
    a, b = dg.rand(3, 4).numpy(), dg.randn(1000).numpy()
    dg.manual_seed(11)
    assert np.array_equal(dg.rand(3, 4).numpy(), a)
    assert np.array_equal(dg.randn(1000).numpy(), b)
    assert a.dtype == F32 and (a >= 0).all() and (a < 1).all()
    assert abs(b.mean()) < 0.15 and 0.85 < b.std() < 1.15
    dg.manual_seed(11)
    expected = np.random.default_rng(11).random((3, 4), dtype=F32)
    assert np.array_equal(a, expected)                    # the same on cpu and gpu


def test_factories_make_leaves_that_can_require_grad(device):
    w = dg.zeros(3, requires_grad=True)
    with dg.with_grad_tape():
        dg.sum(w * 2.0).backward()
    assert np.array_equal(w.grad.numpy(), [2.0, 2.0, 2.0])


def test_a_factory_tensor_lives_as_a_host_value(device):
    x = dg.ones(4)
    with dg.no_grad():
        dg.exp(x)
    with dg.no_grad():                      # a later block does not free it
        assert dg.sum(x).item() == 4.0


@pytest.mark.parametrize("call, error, message", [
    (lambda: dg.zeros(2, -1), dg.InvalidValueError, r"^zeros: argument 'size'"),
    (lambda: dg.ones(2.5), dg.ArgumentTypeError, r"^ones: argument 'size'"),
    (lambda: dg.zeros(*([1] * 7)), dg.InvalidValueError, r"^zeros: argument 'size' has 7"),
    (lambda: dg.full(2, "x"), dg.ArgumentTypeError, r"^full: argument 'fill_value'"),
    (lambda: dg.arange(0, 5, 0), dg.InvalidValueError, r"^arange: argument 'step'"),
    (lambda: dg.arange(0, 5, -1), dg.InvalidValueError, r"^arange: argument 'step'"),
    (lambda: dg.arange(float("inf")), dg.InvalidValueError, r"^arange: argument 'end'"),
    (lambda: dg.linspace(0, 1, -2), dg.InvalidValueError, r"^linspace: argument 'steps'"),
    (lambda: dg.eye(2, -3), dg.InvalidValueError, r"^eye: argument 'm'"),
    (lambda: dg.rand(2, dtype="int32"), dg.ArgumentTypeError, r"^rand: argument 'dtype'"),
    (lambda: dg.zeros(2, requires_grad="yes"), dg.ArgumentTypeError,
     r"^zeros: argument 'requires_grad'"),
    (lambda: dg.arange(2 ** 31, 2 ** 31 + 2), dg.InvalidValueError,
     r"^arange: argument 'start' is 2147483648; expected a number an int32 tensor can hold"),
    (lambda: dg.arange(3, requires_grad=True), dg.InvalidValueError,
     r"^arange: argument 'requires_grad' is True; expected False for a int32 tensor"),
    (lambda: dg.full_like(dg.zeros(2), "x"), dg.ArgumentTypeError,
     r"^full_like: argument 'fill_value'"),
    (lambda: dg.zeros_like(dg.zeros(2), dtype="x"), dg.ArgumentTypeError,
     r"^zeros_like: argument 'dtype'"),
    (lambda: dg.ones_like(dg.zeros(2), requires_grad=1), dg.ArgumentTypeError,
     r"^ones_like: argument 'requires_grad'"),
    (lambda: dg.full_like(dg.arange(2), 2 ** 40), dg.InvalidValueError,
     r"^full_like: argument 'fill_value' is 1099511627776"),
], ids=["negative", "float size", "rank 7", "fill text", "step 0", "step away", "inf end",
        "negative steps", "negative m", "int dtype", "grad flag", "int32 range", "int grad",
        "like fill text", "like dtype", "like grad flag", "like int32 range"])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
