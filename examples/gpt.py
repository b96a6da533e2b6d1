"""Train a character-level GPT on a text shipped with dualgrad (``dualgrad.texts``):
token and position embeddings, pre-norm transformer layers with causal self-attention, a
final layer norm and a linear head over the characters; AdamW. Prints the loss as it
trains, then text sampled from the model.

    python examples/gpt.py                       # cpu
    python examples/gpt.py --device gpu --steps 1000 --layers 4
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import dualgrad as dg
from dualgrad import nn, texts


class GPT(nn.Module):
    """A decoder-only transformer over ``vocab`` characters and ``context`` positions."""

    def __init__(self, vocab: int, context: int = 64, dim: int = 128, layers: int = 2,
                 heads: int = 4, dropout: float = 0.1):
        super().__init__()
        self.context = context
        self.token = nn.Embedding(vocab, dim)
        self.position = nn.PositionalEmbedding(context, dim)      # learned, a row a position
        # (no biases in the blocks: a key's bias never changes the attention, so its
        # gradient is zero but for rounding, which Adam would amplify)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout, activation="gelu",
                                       batch_first=True, norm_first=True, bias=False)
            for _ in range(layers))
        self.norm = nn.LayerNorm(dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        """Logits (B, T, vocab) for int ids (B, T), T <= context."""
        x = self.position(self.token(ids))
        for block in self.blocks:
            x = block(x, is_causal=True)
        return self.head(self.norm(x))


class Characters:
    """The text as ids: ``encode``, ``decode`` and random windows of it."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.ids = np.array([self.index[c] for c in text], np.int32)

    def encode(self, s: str) -> np.ndarray:
        return np.array([self.index[c] for c in s], np.int32)

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)

    def batch(self, rng, size: int, context: int) -> tuple:
        """(inputs (size, context), targets (size * context,)) of ``size`` windows, the
        targets one character on, flat as the loss takes them."""
        start = rng.integers(0, len(self.ids) - context - 1, size)
        rows = start[:, None] + np.arange(context + 1)
        windows = self.ids[rows]
        return windows[:, :-1], windows[:, 1:].reshape(-1)


def loss_of(model: GPT, x, y):
    """Cross-entropy of the next characters (``y``: the batch's flat targets, used as they
    are, so a captured step takes them as its argument)."""
    logits = model(x)
    return dg.softmax_cross_entropy(dg.reshape(logits, (-1, logits.shape[-1])), y)


def sample(model: GPT, chars: Characters, prompt: str, length: int, seed: int = 0,
           temperature: float = 0.8) -> str:
    """``prompt`` continued by ``length`` characters drawn from the model."""
    dg.manual_seed(seed)
    ids = list(chars.encode(prompt))
    model.eval()
    with dg.no_grad():
        for _ in range(length):
            window = dg.tensor([ids[-model.context:]])
            logits = model(window)[:, -1, :] / temperature
            ids.append(dg.multinomial(dg.softmax(logits, -1), 1).item())
    model.train()
    return chars.decode(ids)


def train(device: str = "cpu", steps: int = 500, batch: int = 32, context: int = 64,
          dim: int = 128, layers: int = 2, heads: int = 4, lr: float = 3e-3, seed: int = 0,
          report_every: int = 50, sample_length: int = 200, out=print) -> dict:
    """Train on the shipped text; returns the losses, the sample and the model."""
    previous = dg.ag_device(device)
    try:
        dg.manual_seed(seed)
        chars = Characters(texts.load())
        model = GPT(len(chars.chars), context, dim, layers, heads)
        opt = dg.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        rng = np.random.default_rng(seed)
        losses, start = [], time.perf_counter()
        for k in range(1, steps + 1):
            x, y = chars.batch(rng, batch, context)
            with dg.with_grad_tape():
                loss = loss_of(model, x, y)
                loss.backward()
            dg.clip_grad_norm(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
            if k % report_every == 0 or k == steps:
                out(f"step {k:5d}  loss {np.mean(losses[-report_every:]):.4f}  "
                    f"{(time.perf_counter() - start) / k * 1e3:.1f} ms/step")
        text = sample(model, chars, "The keeper ", sample_length, seed)
        out("sample:\n" + text)
        return {"losses": losses, "sample": text, "model": model}
    finally:
        dg.ag_device(previous)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu, gpu or gpu:N")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    train(args.device, args.steps, args.batch, args.context, args.dim, args.layers,
          args.heads, args.lr, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
