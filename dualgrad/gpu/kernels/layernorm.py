"""layernorm.comp (rows' normalisation, and dx) and layernorm_params.comp (dgamma,
dbeta: column sums); the twins of ``dualgrad/cpu/layernorm.py``."""
from __future__ import annotations

from ..dispatch import MAX_GROUPS, grid, push_constants
from .softmax import rows


def layer_norm(dev, x, gamma, beta, eps):
    count, n = rows(x)
    y, mean, rstd = dev.empty(x.shape), dev.empty((count,)), dev.empty((count,))
    if x.size:
        dev.launch("layernorm", (0,),
                   push_constants((x.address, gamma.address, beta.address, 0, y.address,
                                   mean.address, rstd.address), (count, n), (eps,)),
                   (min(count, MAX_GROUPS), 1, 1), [x, gamma, beta], [y, mean, rstd])
    return y, mean, rstd


def layer_norm_backward(dev, x, gamma, mean, rstd, g):
    count, n = rows(x)
    dx, dgamma, dbeta = dev.empty(x.shape), dev.empty((n,)), dev.empty((n,))
    if x.size:
        dev.launch("layernorm", (1,),
                   push_constants((x.address, gamma.address, 0, g.address, dx.address,
                                   mean.address, rstd.address), (count, n), (0.0,)),
                   (min(count, MAX_GROUPS), 1, 1), [x, gamma, g, mean, rstd], [dx])
        dev.launch("layernorm_params", (),
                   push_constants((x.address, g.address, mean.address, rstd.address,
                                   dgamma.address, dbeta.address), (count, n)),
                   grid(n), [x, g, mean, rstd], [dgamma, dbeta])
    else:
        dev.fill(dgamma, 0.0)
        dev.fill(dbeta, 0.0)
    return dx, dgamma, dbeta
