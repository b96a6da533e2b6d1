"""The GPT training step the benchmarks time (shared by bench_gpu.py and bench_cpu.py):
a character-level decoder (token embedding, learned positions, pre-norm transformer
layers with causal self-attention, no biases, a final layer norm and a linear head) and
one AdamW step on random token windows; ours against the same model in PyTorch eager."""
from __future__ import annotations

import numpy as np

from timing import on_batch

VOCAB = 64


def gpt_data(batch: int, context: int):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, (batch, context + 1)).astype(np.int32)
    return np.ascontiguousarray(ids[:, :-1]), ids[:, 1:].reshape(-1)


def _blocks(nn, dim, layers, heads):
    return [nn.TransformerEncoderLayer(dim, heads, 4 * dim, 0.0, activation="gelu",
                                       batch_first=True, norm_first=True, bias=False)
            for _ in range(layers)]


def ours_gpt_step(dg, batch: int, context: int, dim: int, layers: int, heads: int,
                  replayed: bool = False):
    """fn(): one AdamW step of our GPT on a fixed batch; ``replayed``: through
    ``dg.capture_step`` (recorded once, warmed up here)."""
    nn = dg.nn
    x, y = gpt_data(batch, context)
    token = nn.Embedding(VOCAB, dim)
    position = dg.ag_param(np.zeros((context, dim), np.float32))
    blocks = nn.ModuleList(_blocks(nn, dim, layers, heads))
    norm, head = nn.LayerNorm(dim, bias=False), nn.Linear(dim, VOCAB, bias=False)
    params = [*token.parameters(), position, *blocks.parameters(), *norm.parameters(),
              *head.parameters()]
    opt = dg.optim.AdamW(params, lr=1e-3)

    def train_step(ids, targets):
        with dg.with_grad_tape():
            h = token(ids) + position
            for block in blocks:
                h = block(h, is_causal=True)
            logits = head(norm(h))
            loss = dg.softmax_cross_entropy(dg.reshape(logits, (-1, VOCAB)), targets)
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return on_batch(dg, train_step, (x, y), replayed, "GPT")


def torch_gpt_step(torch, batch: int, context: int, dim: int, layers: int, heads: int,
                   device: str):
    nn = torch.nn
    x, y = (torch.from_numpy(a.astype(np.int64)).to(device) for a in gpt_data(batch, context))
    token = nn.Embedding(VOCAB, dim).to(device)
    position = nn.Parameter(torch.zeros(context, dim, device=device))
    blocks = nn.ModuleList(_blocks(nn, dim, layers, heads)).to(device)
    norm = nn.LayerNorm(dim, bias=False).to(device)
    head = nn.Linear(dim, VOCAB, bias=False).to(device)
    params = [*token.parameters(), position, *blocks.parameters(), *norm.parameters(),
              *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    mask = nn.Transformer.generate_square_subsequent_mask(context, device=device)

    def step():
        h = token(x) + position
        for block in blocks:
            h = block(h, src_mask=mask, is_causal=True)
        logits = head(norm(h))
        torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y).backward()
        opt.step()
        opt.zero_grad()
    return step
