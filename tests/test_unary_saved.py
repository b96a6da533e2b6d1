"""A unary op's backward rule reads only what ``kernel_ops.UNARY_GRAD_READS`` says it
does (x alone where unlisted): the front end keeps nothing else for the backward pass, so
the table must hold on both backends. An operand a rule does not read is given as NaNs
here; the gradient must not change."""
import numpy as np
import pytest

from dualgrad.api import device as active
from dualgrad.kernel_ops import UNARY, UNARY_GRAD_READS

PARAMS = {"clamp": (-0.5, 0.7), "hardtanh": (-0.5, 0.7), "pow_scalar": (2.5, 0.0),
          "rpow_scalar": (1.7, 0.0), "celu": (1.3, 0.0), "leaky_relu": (0.1, 0.0),
          "elu": (1.0, 0.0), "add_scalar": (0.5, 0.0), "mul_scalar": (1.5, 0.0),
          "div_scalar": (2.0, 0.0), "rsub_scalar": (0.5, 0.0), "rdiv_scalar": (2.0, 0.0),
          "maximum_scalar": (0.1, 0.0), "minimum_scalar": (0.1, 0.0)}


@pytest.mark.parametrize("op", [op.name for op in UNARY])
def test_a_unary_backward_reads_what_the_table_says(device, op):
    be = active.active()
    rng = np.random.default_rng(0)
    x = rng.uniform(0.2, 0.9, 256).astype(np.float32)        # inside every op's domain
    g = rng.standard_normal(256).astype(np.float32)
    a, b = PARAMS.get(op, (0.0, 0.0))
    hx, hg = be.upload(x), be.upload(g)
    hy = be.unary(op, hx, a, b)
    nan = be.upload(np.full(256, np.nan, np.float32))
    reads = UNARY_GRAD_READS.get(op, "x")
    want = be.download(be.unary_backward(op, hx, hy, hg, a, b))
    got = be.download(be.unary_backward(op, hx if "x" in reads else nan,
                                        hy if "y" in reads else nan, hg, a, b))
    np.testing.assert_array_equal(got, want)
