"""Train a small CNN on 28x28 digit images that dualgrad draws itself
(``dualgrad.demo.make_digit_images``): two blocks of convolution, batch norm, ReLU and max
pooling, then a linear head; Adam through ``capture_step``. Prints the loss as it trains
and the accuracy on held-out images.

    python examples/cnn.py                       # cpu
    python examples/cnn.py --device gpu --steps 600
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import dualgrad as dg
from dualgrad import nn
from dualgrad.demo import make_digit_images


def build(channels=(16, 32)) -> nn.Module:
    # (no convolution bias: the batch norm after it would subtract it again)
    c1, c2 = channels
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * 7 * 7, 10))


def accuracy(model: nn.Module, x, y, batch: int = 500) -> float:
    """The share of ``x`` classified as ``y``, in eval mode (batch norm's running
    statistics)."""
    model.eval()
    correct = 0
    with dg.no_grad():
        for i in range(0, len(x), batch):
            logits = model(dg.ag_tensor(x[i:i + batch]))
            correct += int((dg.argmax(logits, dim=1).numpy() == y[i:i + batch]).sum())
    model.train()
    return correct / len(x)


def train(device: str = "cpu", steps: int = 300, batch: int = 64, lr: float = 3e-3,
          seed: int = 0, train_size: int = 20000, test_size: int = 2000,
          channels=(16, 32), report_every: int = 50, out=print) -> dict:
    """Train and evaluate; returns the losses and the held-out accuracy."""
    previous = dg.ag_device(device)
    try:
        dg.manual_seed(seed)
        x, y = make_digit_images(train_size, seed)
        x_test, y_test = make_digit_images(test_size, seed + 1)
        model = build(channels)
        opt = dg.optimizer_adam(model.parameters(), lr=lr)

        @dg.capture_step
        def step(xb, yb):
            with dg.with_grad_tape():
                loss = dg.softmax_cross_entropy(model(dg.ag_tensor(xb)), yb)
                loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        rng = np.random.default_rng(seed)
        losses, start = [], time.perf_counter()
        for k in range(1, steps + 1):
            pick = rng.integers(0, train_size, batch)
            losses.append(step(x[pick], y[pick]).item())
            if k % report_every == 0 or k == steps:
                out(f"step {k:5d}  loss {np.mean(losses[-report_every:]):.4f}  "
                    f"{(time.perf_counter() - start) / k * 1e3:.1f} ms/step")
        acc = accuracy(model, x_test, y_test)
        out(f"held-out accuracy {acc:.4f} ({test_size} images, {device})")
        return {"losses": losses, "accuracy": acc, "model": model}
    finally:
        dg.ag_device(previous)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu, gpu or gpu:N")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    train(args.device, args.steps, args.batch, args.lr, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
