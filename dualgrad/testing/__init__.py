"""Agreement between the backends, as a public toolkit.

- ``TOLERANCES`` and ``agreement`` / ``assert_agree``: the bound between cpu and gpu results
  for every primitive, with its reason (``dualgrad.testing.tolerances``).
- ``strategies``: Hypothesis strategies for shapes, broadcasting pairs and float32 arrays with
  edge values, for your own tests.
- ``CHECKS`` and ``run_check``: the differential suite, one check per primitive, which both
  pytest and ``dualgrad verify`` run (``dualgrad.testing.differential``);
  ``tensor_cores_forced(backend)`` runs every matmul it can on the gpu's tensor cores.
- ``lockstep``: train a model on both backends side by side and compare weights and optimizer
  state after every step (``dualgrad.testing.lockstep``).
"""
from . import strategies
from .differential import CHECKS, Check, CheckReport, Pair, run_check, tensor_cores_forced
from .lockstep import LockstepResult, StepDivergence, divergence, lockstep
from .tolerances import (TOLERANCES, U32, Agreement, Tolerance, agreement, assert_agree,
                         gamma, product_scale, ulp_distance, ulp_of)

__all__ = ["TOLERANCES", "Tolerance", "Agreement", "agreement", "assert_agree", "gamma",
           "product_scale", "ulp_distance", "ulp_of", "U32", "strategies", "CHECKS", "Check",
           "CheckReport", "Pair", "run_check", "tensor_cores_forced", "lockstep", "LockstepResult",
           "StepDivergence", "divergence"]
