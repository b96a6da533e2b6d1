"""What PyTorch and NumPy users do without thinking, on both backends: print a tensor, test
its truth, copy and pickle models, spell axes ``dim=``, call ``np.mean(t)``, keep layers in
lists, read ``get_last_lr()``, pass keyword batches to a captured step."""
import copy
import pickle
import re
import warnings

import numpy as np
import pytest

import dualgrad as dg
from conftest import train_step


def _model():
    return dg.nn.Sequential(dg.nn.Linear(3, 5), dg.nn.ReLU(), dg.nn.Linear(5, 2))


def _values(model):
    return [p.numpy() for p in model.parameters()]


# ---------------------------------------------------------------------------------------------
# Printing and truth

def test_repr_shows_values_shape_dtype_and_device(device):
    t = dg.ag_tensor(np.array([[1.5, -2.0], [0.25, 4.0]], np.float32))
    text = repr(t)
    assert text.startswith("Tensor([[ 1.5 , -2.  ],")
    assert "shape=(2, 2)" in text and "dtype=float32" in text
    assert f"device={device}" in text
    assert str(t) == text


def test_repr_of_a_big_tensor_is_a_summary(device):
    text = repr(dg.ag_tensor(np.arange(10_000, dtype=np.float32)))
    assert "..." in text and len(text) < 400


def test_repr_of_a_freed_tensor_says_so_without_raising(device):
    with dg.no_grad():
        y = dg.ag_tensor(np.ones(3, np.float32)) * 2
    with dg.no_grad():
        pass
    assert "<freed>" in repr(y)


def test_bool_of_one_element_is_its_truth_and_of_many_raises(device):
    assert bool(dg.ag_tensor(np.array([2.0], np.float32)))
    assert not bool(dg.ag_tensor(np.zeros((1, 1), np.float32)))
    with pytest.raises(dg.ShapeError, match="exactly one element"):
        bool(dg.ag_tensor(np.ones((3, 4), np.float32)))
    with pytest.raises(ValueError):                  # as NumPy's and PyTorch's
        if dg.ag_tensor(np.ones(2, np.float32)):
            pass


# ---------------------------------------------------------------------------------------------
# Copies and pickles

def test_deepcopy_of_a_model_holds_its_own_storage(device, rng):
    model = _model()
    opt = dg.optimizer_adam(model.parameters(), lr=1e-2)
    twin = copy.deepcopy(model)
    before = _values(model)
    for a, b in zip(_values(twin), before):
        assert np.array_equal(a, b)
    x, y = rng.standard_normal((4, 3)).astype(np.float32), np.array([0, 1, 1, 0])
    train_step(model, opt, x, y)                   # training the original ...
    for a, b in zip(_values(twin), before):        # ... leaves the copy as it was
        assert np.array_equal(a, b)
    assert all(p.requires_grad for p in twin.parameters())


def test_pickle_stores_values_and_loads_onto_the_active_backend(device):
    model = _model()
    data = pickle.dumps(model)
    assert b"_cffi_backend" not in data
    dg.ag_device("cpu")
    loaded = pickle.loads(data)                    # (a gpu model's pickle loads on cpu)
    for a, b in zip(_values(loaded), _values(model)):
        assert np.array_equal(a, b)
    assert isinstance(loaded.parameters()[0], dg.Parameter)
    t = dg.ag_tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    back = pickle.loads(pickle.dumps(t))
    assert np.array_equal(back.numpy(), t.numpy()) and back.requires_grad


# ---------------------------------------------------------------------------------------------
# dim= and NumPy's functions on tensors

@pytest.mark.parametrize("name", ["sum", "mean", "max"])
def test_reductions_take_dim_and_keepdim_as_torch_spells_them(device, name):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dg.ag_tensor(a)
    expected = getattr(a, name)(axis=1, keepdims=True)

    def values(result):                 # (max along one dim: (values, indices), as torch)
        return result.values if name == "max" else result
    assert np.array_equal(values(getattr(t, name)(dim=1, keepdim=True)).numpy(), expected)
    assert np.array_equal(values(getattr(dg, name)(t, dim=1, keepdim=True)).numpy(), expected)
    assert np.array_equal(getattr(t, name)(axis=1, keepdims=True).numpy(), expected)
    with pytest.raises(dg.ArgumentTypeError, match=rf"^{name}: got both 'axis' and 'dim'"):
        getattr(t, name)(axis=0, dim=1)


@pytest.mark.parametrize("fn", [np.sum, np.mean, np.max])
def test_numpy_reductions_call_the_tensor_method(device, fn):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = fn(dg.ag_tensor(a))
    assert isinstance(got, dg.Tensor)
    assert got.item() == pytest.approx(float(fn(a)))
    with pytest.raises(dg.InvalidValueError, match=r"argument 'out'"):
        fn(dg.ag_tensor(a), out=np.zeros(()))


def test_method_errors_name_the_method_not_an_internal_function(device):
    t = dg.ag_tensor(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError) as info:
        t.max(dims=1)
    assert "lambda" not in str(info.value) and "Tensor.max" in str(info.value)
    assert dg.Tensor.sum.__qualname__ == "Tensor.sum"
    assert dg.Tensor.__add__.__qualname__ == "Tensor.__add__"


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_takes_dim(device, name):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    fn = getattr(dg, name)
    assert np.array_equal(fn(a, dim=0).numpy(), fn(a, axis=0).numpy())
    assert np.array_equal(fn(a).numpy(), fn(a, -1).numpy())
    with pytest.raises(dg.ArgumentTypeError, match="both 'axis' and 'dim'"):
        fn(a, 0, dim=0)


# ---------------------------------------------------------------------------------------------
# Layers

def test_layers_are_drawn_in_float32_with_torch_bounds():
    layer = dg.nn.Linear(100, 300)
    w = layer.weight.numpy()
    assert w.dtype == np.float32 and np.abs(w).max() <= 0.1 and np.abs(w).max() > 0.09
    assert dg.nn.Embedding(10, 4).weight.dtype == np.float32
    assert dg.nn.LayerNorm(4).weight.dtype == np.float32
    dg.manual_seed(7)
    first = dg.nn.Linear(4, 4).weight.numpy()
    dg.manual_seed(7)
    assert np.array_equal(dg.nn.Linear(4, 4).weight.numpy(), first)   # seeded


@pytest.mark.parametrize("holder", [list, tuple, lambda layers: dict(enumerate(layers))],
                         ids=["list", "tuple", "dict"])
def test_layers_in_a_collection_are_refused_with_a_message(holder):
    class Net(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = holder([dg.nn.Linear(2, 2), dg.nn.Linear(2, 2)])

    with pytest.raises(dg.ArgumentTypeError, match=r"Net: attribute 'blocks' is a .*"
                                                   r"Sequential"):
        Net()


def test_plain_collections_are_still_attributes():
    class Net(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.sizes = [2, 3]
            self.fc = dg.nn.Linear(2, 3)

    assert Net().sizes == [2, 3] and len(Net().parameters()) == 2


def test_get_last_lr_is_a_list_as_in_torch():
    opt = dg.optimizer_sgd(_model().parameters(), lr=0.5)
    sched = dg.optim.StepLR(opt, step_size=1, gamma=0.1)
    sched.step()
    assert sched.get_last_lr() == [pytest.approx(0.05)]


# ---------------------------------------------------------------------------------------------
# capture_step

def test_a_captured_step_takes_keyword_arguments(device, rng):
    model = _model()
    opt = dg.optimizer_adam(model.parameters(), lr=1e-2)

    @dg.capture_step
    def step(x, *, labels):
        return train_step(model, opt, x, labels)

    twin = _model()
    for a, b in zip(twin.parameters(), model.parameters()):
        dg.residency.write_resident(a, b.numpy())
    twin_opt = dg.optimizer_adam(twin.parameters(), lr=1e-2)
    for i in range(4):
        x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.integers(0, 2, 4)
        got = step(x, labels=y).item()
        want = train_step(twin, twin_opt, x, y).item()
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert step.calls == 4


def test_a_loop_of_ever_new_shapes_is_warned_of_once(device):
    @dg.capture_step
    def step(x):
        return None

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 12):
            step(np.ones((n, 2), np.float32))
    mine = [w for w in caught if issubclass(w.category, dg.DualgradWarning)]
    assert len(mine) == 1
    assert re.search(r"capture_step: the step was recorded \d+ times", str(mine[0].message))
    assert mine[0].filename == __file__                  # points at the caller's line
