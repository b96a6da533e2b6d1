"""The demo: a small digit classifier trained on data the package draws itself.

The dataset is 8x8 images of the ten digits of a 5x7 pixel font, each placed at a random
offset, with strokes randomly broken, contrast varied and Gaussian noise added — easy for an
MLP to learn to about 98%, hard enough that a broken kernel shows.
"""
from __future__ import annotations

import time

import numpy as np

from .errors import bad_value
from .progress import Progress

_FONT = (
    "01110 10001 10011 10101 11001 10001 01110",
    "00100 01100 00100 00100 00100 00100 01110",
    "01110 10001 00001 00010 00100 01000 11111",
    "11111 00010 00100 00010 00001 10001 01110",
    "00010 00110 01010 10010 11111 00010 00010",
    "11111 10000 11110 00001 00001 10001 01110",
    "00110 01000 10000 11110 10001 10001 01110",
    "11111 00001 00010 00100 01000 01000 01000",
    "01110 10001 10001 01110 10001 10001 01110",
    "01110 10001 10001 01111 00001 00010 01100",
)
GLYPHS = np.array([[[c == "1" for c in row] for row in digit.split()] for digit in _FONT],
                  dtype=np.float32)                                 # (10, 7, 5)


def make_digits(n: int, seed: int = 0, noise: float = 0.3):
    """``n`` noisy 8x8 images of the digits 0-9 and their labels, drawn from ``seed``.

    Returns ``(x, y)``: ``x`` of shape (n, 64), float32 (each row an image, row by row;
    values about 0 to 1.4 plus Gaussian noise of standard deviation ``noise``), ``y`` of
    shape (n,), int64 labels 0-9. The same ``seed`` gives the same data; use different seeds
    for training and held-out sets."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    placed = np.zeros((10, 2, 4, 8, 8), np.float32)      # every digit at every offset
    for dy in range(2):
        for dx in range(4):
            placed[:, dy, dx, dy:dy + 7, dx:dx + 5] = GLYPHS
    images = placed[y, rng.integers(0, 2, n), rng.integers(0, 4, n)]
    images *= rng.random(images.shape) > 0.12                     # broken strokes
    images *= rng.uniform(0.6, 1.4, (n, 1, 1)).astype(np.float32)  # contrast
    images += rng.normal(0.0, noise, images.shape).astype(np.float32)
    return images.reshape(n, 64), y.astype(np.int64)


def make_digit_images(n: int, seed: int = 0, size: int = 28, noise: float = 0.3):
    """``n`` noisy ``size`` x ``size`` images of the digits 0-9 (the font's glyphs drawn
    three pixels to a dot, at random offsets, strokes broken, contrast varied, noise
    added) and their labels, drawn from ``seed``: ``x`` float32 (n, 1, size, size), ``y``
    int64 (n,)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    big = GLYPHS.repeat(3, 1).repeat(3, 2)                           # (10, 21, 15)
    h, w = big.shape[1:]
    if not isinstance(size, int) or size < max(h, w):
        raise bad_value("make_digit_images", "size", size, f"an int >= {max(h, w)}")
    images = np.zeros((n, size, size), np.float32)
    dy, dx = rng.integers(0, size - h + 1, n), rng.integers(0, size - w + 1, n)
    for i in range(n):
        images[i, dy[i]:dy[i] + h, dx[i]:dx[i] + w] = big[y[i]]
    images *= rng.random(images.shape) > 0.12                        # broken strokes
    images *= rng.uniform(0.6, 1.4, (n, 1, 1)).astype(np.float32)   # contrast
    images += rng.normal(0.0, noise, images.shape).astype(np.float32)
    return images[:, None], y.astype(np.int64)


def run_demo(device: str = "cpu", steps: int = 500, batch: int = 128, hidden: int = 128,
             lr: float = 3e-3, seed: int = 0, report_every: int = 50, out=print) -> dict:
    """Train a 64-hidden-hidden-10 MLP with Adam; report progress; return the results."""
    import dualgrad as dg

    previous = dg.ag_device(device)
    try:
        dg.manual_seed(seed)
        x_train, y_train = make_digits(60000, seed=seed)
        x_test, y_test = make_digits(2048, seed=seed + 1)
        model = dg.nn.Sequential(dg.nn.Linear(64, hidden), dg.nn.ReLU(),
                                 dg.nn.Linear(hidden, hidden), dg.nn.ReLU(),
                                 dg.nn.Linear(hidden, 10))
        opt = dg.optimizer_adam(model.parameters(), lr=lr)
        rng = np.random.default_rng(seed)
        out(f"training a 64-{hidden}-{hidden}-10 MLP on {dg.ag_device()} for {steps} steps "
            f"(batch {batch})")
        warmup = min(10, steps - 1)          # the first steps include kernel compilation
        loss, t_window = float("nan"), time.perf_counter()
        progress = Progress(steps, "training")
        for step in range(1, steps + 1):
            progress.show(step - 1, f"step {step}")
            if step == warmup + 1:
                t_steady = time.perf_counter()
            idx = rng.integers(0, len(x_train), batch)
            with dg.with_grad_tape():
                loss_t = dg.softmax_cross_entropy(model(dg.ag_tensor(x_train[idx])),
                                                  y_train[idx])
                loss_t.backward()
            opt.step()
            opt.zero_grad()
            if step % report_every == 0 or step == steps:
                loss = loss_t.item()      # the only read: it waits for the device's work
                now = time.perf_counter()
                done = step % report_every or report_every
                progress.close()
                out(f"  step {step:5d}/{steps}  loss {loss:.4f}  "
                    f"{1e3 * (now - t_window) / done:.2f} ms/step")
                t_window = now
        progress.close()
        ms = 1e3 * (time.perf_counter() - t_steady) / (steps - warmup)
        with dg.no_grad():
            logits = model(dg.ag_tensor(x_test)).numpy()
        accuracy = float((logits.argmax(axis=1) == y_test).mean())
        out(f"test accuracy {accuracy:.4f}   {ms:.2f} ms/step (after {warmup} warm-up "
            f"steps)   final loss {loss:.4f}")
        return {"device": device, "accuracy": accuracy, "ms_per_step": ms, "loss": loss,
                "steps": steps}
    finally:
        dg.ag_device(previous)
