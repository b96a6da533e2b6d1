"""The convolution cases the benchmarks time (shared by bench_cpu.py and bench_gpu.py):
a small CNN's Adam training step on 28x28 images, two conv-relu-maxpool blocks (32 and 64
channels, 3x3, padding 1) and a linear head, and one 3x3 convolution's forward and
backward alone; ours against the same model in PyTorch."""
from __future__ import annotations

import numpy as np

from timing import classifier_step, on_batch

CHANNELS = (1, 32, 64)


def cnn_data(batch: int):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, 1, 28, 28)).astype(np.float32),
            rng.integers(0, 10, batch))


def _layers(nn):
    c0, c1, c2 = CHANNELS
    return [nn.Conv2d(c0, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(c2 * 7 * 7, 10)]


def ours_cnn_train(dg):
    """fn(x, y): one Adam step of a new CNN, returning the loss."""
    model = dg.nn.Sequential(*_layers(dg.nn))
    return classifier_step(dg, model, dg.optimizer_adam(model.parameters(), lr=1e-3))


def ours_cnn_step(dg, batch: int, replayed: bool = False):
    """fn(): one Adam step of the CNN on a fixed batch (uploaded each step); ``replayed``:
    through ``dg.capture_step`` (recorded once, warmed up here)."""
    return on_batch(dg, ours_cnn_train(dg), cnn_data(batch), replayed, "CNN")


def torch_cnn_step(torch, batch: int, device: str):
    """fn(): the same step in PyTorch eager on ``device`` (the batch converted each step)."""
    x, y = cnn_data(batch)
    model = torch.nn.Sequential(*_layers(torch.nn)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    targets = torch.from_numpy(y).to(device)

    def step():
        logits = model(torch.from_numpy(x).to(device))
        torch.nn.functional.cross_entropy(logits, targets).backward()
        opt.step()
        opt.zero_grad()
    return step


def conv_shapes(batch: int, channels: int, size: int):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((batch, channels, size, size)).astype(np.float32),
            rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.1)


def ours_conv(dg, batch: int, channels: int, size: int):
    """fn(): conv2d (3x3, padding 1) forward and backward to the input and weight."""
    x, w = conv_shapes(batch, channels, size)
    tx, tw = dg.ag_tensor(x, requires_grad=True), dg.ag_param(w)

    def run():
        with dg.with_grad_tape():
            dg.sum(dg.conv2d(tx, tw, padding=1)).backward()
        tx.grad = tw.grad = None
    return run


def torch_conv(torch, batch: int, channels: int, size: int, device: str):
    x, w = conv_shapes(batch, channels, size)
    tx = torch.from_numpy(x).to(device).requires_grad_()
    tw = torch.from_numpy(w).to(device).requires_grad_()

    def run():
        torch.nn.functional.conv2d(tx, tw, padding=1).sum().backward()
        tx.grad = tw.grad = None
    return run
