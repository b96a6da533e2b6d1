"""Optimizers and schedules (``dg.optim``): see ``dualgrad.api.optim``."""
from .api.optim import (SGD, Adam, AdamW, CosineAnnealingLR, LRScheduler,  # noqa: F401
                        Optimizer, StepLR, WarmupCosineLR, clip_grad_norm,
                        clip_grad_value)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm", "clip_grad_value",
           "LRScheduler", "StepLR",
           "CosineAnnealingLR", "WarmupCosineLR"]
