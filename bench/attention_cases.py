"""The attention case the benchmarks time (shared by bench_cpu.py and bench_gpu.py): causal
scaled dot-product attention's forward and backward, heads of 64, batch x heads 4 x 8, in
float32; ours against PyTorch's scaled_dot_product_attention."""
from __future__ import annotations

import numpy as np

SHAPE = (4, 8, None, 64)          # batch, heads, length (the case's), head dim


def attention_name(length: int) -> str:
    return f"attention fwd+bwd causal T={length} D=64 (4 x 8 heads)"


def attention_inputs(length: int) -> list:
    rng = np.random.default_rng(0)
    batch, heads, _, dim = SHAPE
    return [rng.standard_normal((batch, heads, length, dim)).astype(np.float32)
            for _ in range(3)]


def ours_attention(dg, length: int):
    """fn(): our forward and backward of the case (q, k and v resident on the device)."""
    tensors = [dg.ag_tensor(a, requires_grad=True) for a in attention_inputs(length)]

    def step():
        with dg.with_grad_tape():
            dg.sum(dg.scaled_dot_product_attention(*tensors, is_causal=True)).backward()
        for t in tensors:
            t.grad = None
    return step


def torch_attention(torch, length: int, device: str):
    """fn(): PyTorch's forward and backward of the case on ``device``."""
    tensors = [torch.from_numpy(a).to(device).requires_grad_()
               for a in attention_inputs(length)]

    def step():
        torch.nn.functional.scaled_dot_product_attention(*tensors, is_causal=True) \
            .sum().backward()
        for t in tensors:
            t.grad = None
    return step
