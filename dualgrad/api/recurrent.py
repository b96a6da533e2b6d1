"""Recurrent layers, as PyTorch's: ``RNN``, ``LSTM``, ``GRU`` (``num_layers``, ``bias``,
``batch_first``, ``dropout`` between layers, ``bidirectional``) and the cells ``RNNCell``,
``LSTMCell``, ``GRUCell``, with PyTorch's parameter names, shapes, gate order and
initialisation (U(-1/sqrt(hidden), 1/sqrt(hidden)) from dualgrad's generator), so a
PyTorch ``state_dict`` of one loads into the other.

A layer's input projections for every time step are one product before the loop; each
step then adds the hidden state's product and applies the gates (elementwise ops). The
gradient flows back through time by the tape, as any composition's.
"""
from __future__ import annotations

import math

from ..errors import bad_shape, bad_value
from . import checks
from .creation import zeros
from .indexing import concat, flip, stack, swapaxes
from .nn import Dropout, Module, _uniform
from .ops import _tensor, add, linear, mul, relu, reshape, sigmoid, sub, tanh
from .tensor import Tensor, ag_param

_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(nonlinearity: str):
    act = tanh if nonlinearity == "tanh" else relu

    def step(xw, h, c, w_hh, b_hh):
        return act(add(xw, linear(h, w_hh, b_hh))), None
    return step


def _lstm_step(xw, h, c, w_hh, b_hh):
    """PyTorch's LSTM: gates i, f, g, o in that order along the projection."""
    gates = add(xw, linear(h, w_hh, b_hh))
    n = h.shape[-1]
    i, f, g, o = (gates[..., k * n:(k + 1) * n] for k in range(4))
    c = add(mul(sigmoid(f), c), mul(sigmoid(i), tanh(g)))
    return mul(sigmoid(o), tanh(c)), c


def _gru_step(xw, h, c, w_hh, b_hh):
    """PyTorch's GRU: r, z, n; n = tanh(x W_in + b_in + r (h W_hn + b_hn)),
    h' = (1 - z) n + z h."""
    hw = linear(h, w_hh, b_hh)
    n_ = h.shape[-1]
    xr, xz, xn = (xw[..., k * n_:(k + 1) * n_] for k in range(3))
    hr, hz, hn = (hw[..., k * n_:(k + 1) * n_] for k in range(3))
    r, z = sigmoid(add(xr, hr)), sigmoid(add(xz, hz))
    n = tanh(add(xn, mul(r, hn)))
    return add(n, mul(z, sub(h, n))), None          # (1 - z) n + z h


def _step_of(mode: str, nonlinearity: str):
    return {"RNN": _rnn_step(nonlinearity), "LSTM": _lstm_step, "GRU": _gru_step}[mode]


def _initial(fn: str, mode: str, hx, shape: tuple, dtype, names: tuple) -> tuple:
    """(h, c) as given in ``hx`` (an LSTM's a pair), or zeros; each of ``shape``. c is None
    but for an LSTM."""
    lstm = mode == "LSTM"
    if lstm and hx is not None and (not isinstance(hx, tuple) or len(hx) != 2):
        raise bad_value(fn, "hx", type(hx).__name__, f"a tuple ({names[0]}, {names[1]})")
    given = (hx if hx is not None else (None, None)) if lstm else (hx,)
    states = []
    for name, value in zip(names, given):
        value = zeros(*shape, dtype=dtype) if value is None else _tensor(fn, name, value)
        if value.shape != shape:
            raise bad_shape(fn, name, value.shape, f"{shape}")
        states.append(value)
    return states[0], (states[1] if lstm else None)


class _RNNBase(Module):
    mode = "RNN"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False):
        super().__init__()
        fn = type(self).__name__
        self.input_size = checks.integer(fn, "input_size", input_size, 1)
        self.hidden_size = checks.integer(fn, "hidden_size", hidden_size, 1)
        self.num_layers = checks.integer(fn, "num_layers", num_layers, 1)
        if nonlinearity not in ("tanh", "relu"):
            raise bad_value(fn, "nonlinearity", nonlinearity, "'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        self.bias = checks.flag(fn, "bias", bias)
        self.batch_first = checks.flag(fn, "batch_first", batch_first)
        self.dropout = checks.number(fn, "dropout", dropout, 0.0, 1.0)
        self.bidirectional = checks.flag(fn, "bidirectional", bidirectional)
        self.between = Dropout(self.dropout) if self.dropout and self.num_layers > 1 else None
        gates = _GATES[self.mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        directions = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            width = self.input_size if layer == 0 else self.hidden_size * directions
            for suffix in ("", "_reverse")[:directions]:
                self._param(f"weight_ih_l{layer}{suffix}", bound, (gates, width))
                self._param(f"weight_hh_l{layer}{suffix}", bound, (gates, self.hidden_size))
                if self.bias:
                    self._param(f"bias_ih_l{layer}{suffix}", bound, (gates,))
                    self._param(f"bias_hh_l{layer}{suffix}", bound, (gates,))

    def _param(self, name: str, bound: float, shape: tuple) -> None:
        setattr(self, name, ag_param(_uniform(bound, shape)))

    def forward(self, input, hx=None):  # noqa: A002 - PyTorch's argument names
        fn = type(self).__name__
        x = _tensor(fn, "input", input)
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise bad_shape(fn, "input", x.shape, f"(L, N, {self.input_size}) or "
                            f"(L, {self.input_size})" + (" (batch_first: (N, L, ...))"
                                                         if self.batch_first else ""))
        unbatched = x.ndim == 2
        if unbatched:
            x = reshape(x, (x.shape[0], 1, x.shape[1]))
        elif self.batch_first:
            x = swapaxes(x, 0, 1)
        steps, batch = x.shape[0], x.shape[1]
        count = self.num_layers * (2 if self.bidirectional else 1)
        h0, c0 = _initial(fn, self.mode, hx, (count, self.hidden_size) if unbatched else
                          (count, batch, self.hidden_size), x.dtype, ("h_0", "c_0"))
        if unbatched:
            h0, c0 = (None if v is None else reshape(v, (count, 1, self.hidden_size))
                      for v in (h0, c0))
        step = _step_of(self.mode, self.nonlinearity)
        directions = 2 if self.bidirectional else 1
        last_h, last_c = [], []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                k = layer * directions + d
                seq = flip(x, (0,)) if d else x
                out, h, c = self._run(seq, h0[k], None if c0 is None else c0[k], step,
                                      layer, suffix)
                outputs.append(flip(out, (0,)) if d else out)
                last_h.append(h)
                last_c.append(c)
            x = outputs[0] if directions == 1 else concat(outputs, -1)
            if self.between is not None and layer < self.num_layers - 1:
                x = self.between(x)
        h_n = stack(last_h, 0)
        c_n = stack(last_c, 0) if self.mode == "LSTM" else None
        if unbatched:
            x = reshape(x, (steps, x.shape[-1]))
            h_n = reshape(h_n, (h_n.shape[0], self.hidden_size))
            c_n = None if c_n is None else reshape(c_n, h_n.shape)
        elif self.batch_first:
            x = swapaxes(x, 0, 1)
        return x, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _run(self, seq: Tensor, h, c, step, layer: int, suffix: str) -> tuple:
        """One direction of one layer over the sequence (L, N, width): (outputs, h, c)."""
        w_ih = getattr(self, f"weight_ih_l{layer}{suffix}")
        w_hh = getattr(self, f"weight_hh_l{layer}{suffix}")
        b_ih = getattr(self, f"bias_ih_l{layer}{suffix}", None)
        b_hh = getattr(self, f"bias_hh_l{layer}{suffix}", None)
        steps, batch, width = seq.shape
        # every step's input projection in one product
        xw = reshape(linear(reshape(seq, (steps * batch, width)), w_ih, b_ih),
                     (steps, batch, w_ih.shape[0]))
        outs = []
        for t in range(steps):
            h, c = step(xw[t], h, c, w_hh, b_hh)
            outs.append(h)
        return stack(outs, 0), h, c

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.batch_first:
            text += ", batch_first=True"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(_RNNBase):
    """An Elman network: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu),
    as ``torch.nn.RNN``; returns (output, h_n)."""

    mode = "RNN"


class LSTM(_RNNBase):
    """Long short-term memory, as ``torch.nn.LSTM`` (gates i, f, g, o); returns (output,
    (h_n, c_n)). ``proj_size`` is not offered."""

    mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0):
        if proj_size:
            raise bad_value("LSTM", "proj_size", proj_size, "0 (projections are not offered)")
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first,
                         dropout, bidirectional)


class GRU(_RNNBase):
    """Gated recurrent units, as ``torch.nn.GRU`` (gates r, z, n); returns (output, h_n)."""

    mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first,
                         dropout, bidirectional)


class _CellBase(Module):
    mode = "RNN"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh"):
        super().__init__()
        fn = type(self).__name__
        self.input_size = checks.integer(fn, "input_size", input_size, 1)
        self.hidden_size = checks.integer(fn, "hidden_size", hidden_size, 1)
        self.bias = checks.flag(fn, "bias", bias)
        if nonlinearity not in ("tanh", "relu"):
            raise bad_value(fn, "nonlinearity", nonlinearity, "'tanh' or 'relu'")
        self.nonlinearity = nonlinearity
        gates = _GATES[self.mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self.weight_ih = ag_param(_uniform(bound, (gates, self.input_size)))
        self.weight_hh = ag_param(_uniform(bound, (gates, self.hidden_size)))
        self.bias_ih = ag_param(_uniform(bound, (gates,))) if self.bias else None
        self.bias_hh = ag_param(_uniform(bound, (gates,))) if self.bias else None

    def forward(self, input, hx=None):  # noqa: A002
        fn = type(self).__name__
        x = _tensor(fn, "input", input)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise bad_shape(fn, "input", x.shape, f"(N, {self.input_size}) or "
                            f"({self.input_size},)")
        h, c = _initial(fn, self.mode, hx, x.shape[:-1] + (self.hidden_size,), x.dtype,
                        ("h", "c"))
        xw = linear(x, self.weight_ih, self.bias_ih)
        h, c = _step_of(self.mode, self.nonlinearity)(xw, h, c, self.weight_hh, self.bias_hh)
        return (h, c) if self.mode == "LSTM" else h

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class RNNCell(_CellBase):
    """One step of ``RNN``: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    mode = "RNN"


class LSTMCell(_CellBase):
    """One step of ``LSTM``: returns (h', c')."""

    mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__(input_size, hidden_size, bias)


class GRUCell(_CellBase):
    """One step of ``GRU``: returns h'."""

    mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__(input_size, hidden_size, bias)


__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]
