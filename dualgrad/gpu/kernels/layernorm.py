"""layernorm.comp (rows' normalisation, and dx) and layernorm_params.comp (dgamma,
dbeta: column sums); the twins of ``dualgrad/cpu/layernorm.py``."""
from __future__ import annotations

from ..dispatch import MAX_GROUPS, grid, push_constants
from .softmax import rows


# Rows of at most this many elements take a subgroup each (layernorm.comp's SUBGROUP_ROWS),
# a workgroup's 8 of them where subgroups are 32 wide; longer rows a workgroup each.
SUBGROUP_ROW_MAX = 1024
SUBGROUPS_A_GROUP = 256 // 32


def _spec_and_groups(backward: int, count: int, n: int) -> tuple:
    """layernorm.comp's specialization and its workgroups for ``count`` rows of ``n``."""
    if n <= SUBGROUP_ROW_MAX:
        return (backward, 1), (min(-(-count // SUBGROUPS_A_GROUP), MAX_GROUPS), 1, 1)
    return (backward, 0), (min(count, MAX_GROUPS), 1, 1)


def layer_norm(dev, x, gamma, beta, eps):
    """(y, mean, rstd); ``beta`` None: no shift (layernorm.comp's BIAS 0)."""
    count, n = rows(x)
    y, mean, rstd = dev.empty(x.shape), dev.empty((count,)), dev.empty((count,))
    if x.size:
        spec, groups = _spec_and_groups(0, count, n)
        shift = beta.address if beta is not None else 0
        dev.launch("layernorm", spec + (int(beta is not None),),
                   push_constants((x.address, gamma.address, shift, 0, y.address,
                                   mean.address, rstd.address), (count, n), (eps,)),
                   groups, [x, gamma] + ([beta] if beta is not None else []),
                   [y, mean, rstd])
    return y, mean, rstd


CHUNK_ROWS = 64            # rows a workgroup of layernorm_params's first stage sums, at least
MAX_CHUNKS = 1024          # ... and at most this many chunks (then longer ones)


def _param_grads(dev, x, g, mean, rstd, dgamma, dbeta, count: int, n: int) -> None:
    """dgamma and dbeta, the column sums, by layernorm_params.comp's two stages: partial
    sums of chunks of rows (a workgroup a block of 32 columns times a chunk), then each
    column's partials added in order."""
    chunk = max(CHUNK_ROWS, -(-count // MAX_CHUNKS))
    chunks = -(-count // chunk)
    part = dev.empty((2 * chunks * n,))
    addrs = (x.address, g.address, mean.address, rstd.address, dgamma.address,
             dbeta.address, part.address)
    uints = (count, n, chunk, chunks)
    dev.launch("layernorm_params", (0,), push_constants(addrs, uints),
               (min(-(-n // 32), MAX_GROUPS), chunks, 1), [x, g, mean, rstd], [part])
    dev.launch("layernorm_params", (1,), push_constants(addrs, uints), grid(n), [part],
               [dgamma, dbeta])


def layer_norm_backward(dev, x, gamma, mean, rstd, g, out=(None, None)):
    """(dx, dgamma, dbeta), dgamma and dbeta in ``out``'s storage where given."""
    count, n = rows(x)
    dx = dev.empty(x.shape)
    dgamma, dbeta = (o if o is not None else dev.empty((n,)) for o in out)
    if x.size:
        spec, groups = _spec_and_groups(1, count, n)
        dev.launch("layernorm", spec,
                   push_constants((x.address, gamma.address, 0, g.address, dx.address,
                                   mean.address, rstd.address), (count, n), (0.0,)),
                   groups, [x, gamma, g, mean, rstd], [dx])
        _param_grads(dev, x, g, mean, rstd, dgamma, dbeta, count, n)
    else:
        dev.fill(dgamma, 0.0)
        dev.fill(dbeta, 0.0)
    return dx, dgamma, dbeta
