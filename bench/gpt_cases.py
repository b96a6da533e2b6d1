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


def ours_gpt_model(dg, context: int, dim: int, layers: int, heads: int):
    """Our GPT as a Module: token ids (batch, context) -> logits (batch, context, VOCAB)."""
    nn = dg.nn

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.token = nn.Embedding(VOCAB, dim)
            self.position = dg.ag_param(np.zeros((context, dim), np.float32))
            self.blocks = nn.ModuleList(_blocks(nn, dim, layers, heads))
            self.norm = nn.LayerNorm(dim, bias=False)
            self.head = nn.Linear(dim, VOCAB, bias=False)

        def forward(self, ids):
            h = self.token(ids) + self.position
            for block in self.blocks:
                h = block(h, is_causal=True)
            return self.head(self.norm(h))

    return GPT()


def gpt_train_step(dg, model, opt):
    """fn(ids, targets): one step of ``opt`` on ``model``'s next-token loss."""
    def train_step(ids, targets):
        with dg.with_grad_tape():
            logits = model(ids)
            loss = dg.softmax_cross_entropy(dg.reshape(logits, (-1, VOCAB)), targets)
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return train_step


def ours_gpt_step(dg, batch: int, context: int, dim: int, layers: int, heads: int,
                  replayed: bool = False, autocast: str | None = None):
    """fn(): one AdamW step of our GPT on a fixed batch; ``replayed``: through
    ``dg.capture_step`` (recorded once, warmed up here); ``autocast``: under that type."""
    model = ours_gpt_model(dg, context, dim, layers, heads)
    opt = dg.optim.AdamW(model.parameters(), lr=1e-3)
    step = gpt_train_step(dg, model, opt)
    if autocast is not None:
        step = dg.autocast(autocast)(step)
    return on_batch(dg, step, gpt_data(batch, context), replayed, "GPT")


def torch_gpt_model(torch, context: int, dim: int, layers: int, heads: int, device: str):
    """The same GPT in PyTorch, as a Module: ids -> logits."""
    nn = torch.nn

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.token = nn.Embedding(VOCAB, dim)
            self.position = nn.Parameter(torch.zeros(context, dim))
            self.blocks = nn.ModuleList(_blocks(nn, dim, layers, heads))
            self.norm = nn.LayerNorm(dim, bias=False)
            self.head = nn.Linear(dim, VOCAB, bias=False)
            self.register_buffer(
                "mask", nn.Transformer.generate_square_subsequent_mask(context),
                persistent=False)

        def forward(self, ids):
            h = self.token(ids) + self.position
            for block in self.blocks:
                h = block(h, src_mask=self.mask, is_causal=True)
            return self.head(self.norm(h))

    return GPT().to(device)


def torch_gpt_loss(torch, model, ids, targets):
    return torch.nn.functional.cross_entropy(model(ids).reshape(-1, VOCAB), targets)


def torch_gpt_step(torch, batch: int, context: int, dim: int, layers: int, heads: int,
                   device: str, autocast=None):
    """The same step in PyTorch; ``autocast``: under torch.autocast with that dtype."""
    x, y = (torch.from_numpy(a.astype(np.int64)).to(device) for a in gpt_data(batch, context))
    model = torch_gpt_model(torch, context, dim, layers, heads, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        if autocast is None:
            loss = torch_gpt_loss(torch, model, x, y)
        else:
            with torch.autocast(device, dtype=autocast):
                loss = torch_gpt_loss(torch, model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step
