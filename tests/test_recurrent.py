"""Recurrent layers (dualgrad/api/recurrent.py) on both backends: RNN, LSTM and GRU and
their cells against a float64 NumPy transcription of PyTorch's documented equations, with
PyTorch's parameter names; gradients by float64 finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import dualgrad as dg

RNG = np.random.default_rng(51)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One step of PyTorch's equations, in float64."""
    xw, hw = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    n = h.shape[-1]
    if mode == "RNN":
        return np.tanh(xw + hw), None
    if mode == "LSTM":
        i, f, g, o = (xw + hw)[..., :n], (xw + hw)[..., n:2 * n], (xw + hw)[..., 2 * n:3 * n], \
            (xw + hw)[..., 3 * n:]
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c), c
    r = _sigmoid(xw[..., :n] + hw[..., :n])
    z = _sigmoid(xw[..., n:2 * n] + hw[..., n:2 * n])
    m = np.tanh(xw[..., 2 * n:] + r * hw[..., 2 * n:])
    return (1 - z) * m + z * h, None


def _reference(mode, state, x, layers, directions, hidden):
    """(output, h_n, c_n) of the stacked network (L, N, input), float64."""
    w = {k: v.astype(np.float64) for k, v in state.items()}
    hs, cs = [], []
    for layer in range(layers):
        outs = []
        for d, suffix in enumerate(("", "_reverse")[:directions]):
            key = f"l{layer}{suffix}"
            zero = np.zeros((x.shape[1], hidden))
            b_ih = w.get(f"bias_ih_{key}", 0.0)
            b_hh = w.get(f"bias_hh_{key}", 0.0)
            h, c, seq = zero, zero, []
            for t in (range(len(x)) if d == 0 else reversed(range(len(x)))):
                h, c = _cell(mode, x[t], h, c, w[f"weight_ih_{key}"], w[f"weight_hh_{key}"],
                             b_ih, b_hh)
                seq.append(h)
            outs.append(np.stack(seq if d == 0 else seq[::-1]))
            hs.append(h)
            cs.append(c)
        x = np.concatenate(outs, -1)
    return x, np.stack(hs), (np.stack(cs) if mode == "LSTM" else None)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("kwargs", [{}, {"num_layers": 2, "bidirectional": True},
                                    {"batch_first": True, "bias": False}],
                         ids=["plain", "2 layers bidirectional", "batch_first no bias"])
def test_recurrent_layers_follow_torchs_equations(device, mode, kwargs):
    dg.manual_seed(5)
    layer = getattr(dg.nn, mode)(5, 6, **kwargs)
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32)      # (L, N, input)
    given = x.transpose(1, 0, 2) if kwargs.get("batch_first") else x
    out, state = layer(dg.ag_tensor(np.ascontiguousarray(given)))
    layers, directions = kwargs.get("num_layers", 1), 2 if kwargs.get("bidirectional") else 1
    want, h_n, c_n = _reference(mode, layer.state_dict(), x.astype(np.float64), layers,
                                directions, 6)
    got = out.numpy().transpose(1, 0, 2) if kwargs.get("batch_first") else out.numpy()
    np.testing.assert_allclose(got, want, atol=3e-6)
    h = state[0] if mode == "LSTM" else state
    np.testing.assert_allclose(h.numpy(), h_n, atol=3e-6)
    if mode == "LSTM":
        np.testing.assert_allclose(state[1].numpy(), c_n, atol=3e-6)


def test_parameter_names_shapes_and_initial_state(device):
    lstm = dg.nn.LSTM(5, 6, num_layers=2, bidirectional=True)
    shapes = {k: v.shape for k, v in lstm.state_dict().items()}
    assert shapes["weight_ih_l0"] == (24, 5) and shapes["weight_hh_l0_reverse"] == (24, 6)
    assert shapes["weight_ih_l1"] == (24, 12) and shapes["bias_hh_l1_reverse"] == (24,)
    assert len(shapes) == 16
    bound = 1 / np.sqrt(6)
    assert all(np.abs(v).max() <= bound for v in lstm.state_dict().values())
    x = dg.ag_tensor(RNG.standard_normal((3, 2, 5)).astype(np.float32))
    h0, c0 = dg.randn(4, 2, 6), dg.randn(4, 2, 6)
    out, (h, c) = lstm(x, (h0, c0))
    out0, _ = lstm(x)
    assert not np.allclose(out.numpy(), out0.numpy())       # the given state is used
    assert out.shape == (3, 2, 12) and h.shape == c.shape == (4, 2, 6)
    unbatched, h1 = dg.nn.GRU(5, 6)(dg.ag_tensor(RNG.standard_normal((3, 5)).astype(np.float32)))
    assert unbatched.shape == (3, 6) and h1.shape == (1, 6)


def test_cells_are_one_step_of_their_layers(device):
    for mode in ("RNN", "LSTM", "GRU"):
        dg.manual_seed(6)
        cell = getattr(dg.nn, mode + "Cell")(5, 6)
        x = RNG.standard_normal((3, 5)).astype(np.float32)
        state = cell.state_dict()
        h, c = _cell(mode, x.astype(np.float64), np.zeros((3, 6)), np.zeros((3, 6)),
                     state["weight_ih"], state["weight_hh"], state["bias_ih"],
                     state["bias_hh"])
        got = cell(dg.ag_tensor(x))
        np.testing.assert_allclose((got[0] if mode == "LSTM" else got).numpy(), h, atol=3e-6)
        if mode == "LSTM":
            np.testing.assert_allclose(got[1].numpy(), c, atol=3e-6)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_recurrent_gradients_in_float64(mode):
    dg.manual_seed(7)
    layer = getattr(dg.nn, mode)(3, 4, num_layers=2, bidirectional=True).double()
    x = RNG.standard_normal((3, 2, 3))
    assert dg.gradcheck(lambda t: layer(t)[0], x)
    assert dg.gradcheck(lambda t: _with_weight(layer, t, x), layer.weight_hh_l0.numpy())


def _with_weight(layer, weight, x):
    """The layer's output as a function of weight_hh_l0 (a tensor swapped in)."""
    saved = layer.weight_hh_l0
    object.__setattr__(layer, "weight_hh_l0", weight)
    try:
        return layer(dg.ag_tensor(x, dtype="float64"))[0]
    finally:
        object.__setattr__(layer, "weight_hh_l0", saved)


def test_dropout_between_layers_trains_only(device):
    dg.manual_seed(8)
    gru = dg.nn.GRU(4, 5, num_layers=2, dropout=0.5)
    x = dg.ag_tensor(RNG.standard_normal((3, 2, 4)).astype(np.float32))
    a, b = gru(x)[0].numpy(), gru(x)[0].numpy()
    assert not np.array_equal(a, b)
    gru.eval()
    np.testing.assert_array_equal(gru(x)[0].numpy(), gru(x)[0].numpy())


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: dg.nn.LSTM(5, 6)(dg.ones(3, 2, 4)), dg.ShapeError, r"^LSTM: argument 'input'"),
    (lambda: dg.nn.LSTM(5, 6)(dg.ones(3, 2, 5), dg.ones(1, 2, 6)), dg.InvalidValueError,
     r"^LSTM: argument 'hx'"),
    (lambda: dg.nn.GRU(5, 6)(dg.ones(3, 2, 5), dg.ones(2, 2, 6)), dg.ShapeError,
     r"^GRU: argument 'h_0'"),
    (lambda: dg.nn.RNN(5, 6, nonlinearity="gelu"), dg.InvalidValueError,
     r"^RNN: argument 'nonlinearity'"),
    (lambda: dg.nn.LSTM(5, 6, proj_size=2), dg.InvalidValueError, r"^LSTM: argument 'proj"),
    (lambda: dg.nn.GRUCell(5, 6)(dg.ones(2, 5), dg.ones(3, 6)), dg.ShapeError,
     r"^GRUCell: argument 'h'"),
])
def test_recurrent_errors(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()
