"""The optimizer steps the benchmarks time (shared by bench_gpu.py and bench_cpu.py): one
step of each rule over the parameters of an MLP 784-H-H-10 whose gradients are set, ours
against the same torch.optim class (its fused kernel where it has one, else foreach)."""
from __future__ import annotations

import numpy as np

# (label, optimizer class, hyperparameters): each rule once, with the options that add state
OPTIM_CASES = [
    ("SGD momentum", "SGD", dict(lr=1e-3, momentum=0.9)),
    ("Adam", "Adam", dict(lr=1e-3)),
    ("AdamW amsgrad", "AdamW", dict(lr=1e-3, amsgrad=True)),
    ("RMSprop centered momentum", "RMSprop", dict(lr=1e-3, momentum=0.9, centered=True)),
    ("Adagrad", "Adagrad", dict(lr=1e-2)),
    ("Adamax", "Adamax", dict(lr=2e-3)),
    ("NAdam", "NAdam", dict(lr=2e-3)),
    ("RAdam", "RAdam", dict(lr=1e-3)),
]


def mlp_shapes(hidden: int) -> list:
    return [(hidden, 784), (hidden,), (hidden, hidden), (hidden,), (10, hidden), (10,)]


def ours_optim_step(dg, kind: str, hyper: dict, hidden: int):
    """fn(): one step of dualgrad's optimizer over resident parameters with gradients."""
    rng = np.random.default_rng(1)
    params = [dg.ag_param(rng.standard_normal(s).astype(np.float32) * 0.01)
              for s in mlp_shapes(hidden)]
    for p in params:
        p.grad = rng.standard_normal(p.shape).astype(np.float32)
    opt = getattr(dg.optim, kind)(params, **hyper)
    return opt.step


def torch_optim_step(torch, kind: str, hyper: dict, hidden: int, device: str):
    """fn(): one step of torch.optim's ``kind`` (fused where it can be, else foreach)."""
    gen = torch.Generator().manual_seed(1)
    params = [torch.randn(s, generator=gen).mul_(0.01).to(device).requires_grad_()
              for s in mlp_shapes(hidden)]
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).to(device)
    cls = getattr(torch.optim, kind)
    for options in (dict(fused=True), dict(foreach=True), {}):
        try:
            opt = cls(params, **hyper, **options)
            opt.step()
            return opt.step
        except (TypeError, RuntimeError, ValueError):
            continue
    raise RuntimeError(f"torch.optim.{kind} would not step")
