"""softmax.comp (softmax, log-softmax and their backward, and the fused softmax
cross-entropy, over the last axis) and xent_backward.comp; the twins of
``dualgrad/cpu/softmax.py``."""
from __future__ import annotations

from ..dispatch import MAX_GROUPS, grid, push_constants
from ..workspace import COUNTER


def rows(x) -> tuple:
    """(rows, row length) of x read as a 2-D view over its last axis."""
    n = x.shape[-1] if x.shape else 1
    return (x.size // n if n else 0), n


def _softmax(dev, x, log):
    out = dev.empty(x.shape)
    count, n = rows(x)
    if x.size:
        dev.launch("softmax", (log, 0, 0),
                   push_constants((x.address, 0, 0, out.address, 0, 0, 0, 0), (count, n)),
                   (min(count, MAX_GROUPS), 1, 1), [x], [out])
    return out


def softmax(dev, x):
    return _softmax(dev, x, 0)


def log_softmax(dev, x):
    return _softmax(dev, x, 1)


def _softmax_grad(dev, y, g, log):
    out = dev.empty(g.shape)
    count, n = rows(g)
    if g.size:
        dev.launch("softmax", (log, 1, 0),
                   push_constants((0, y.address, g.address, out.address, 0, 0, 0, 0),
                                  (count, n)),
                   (min(count, MAX_GROUPS), 1, 1), [y, g], [out])
    return out


def softmax_backward(dev, y, g):
    return _softmax_grad(dev, y, g, 0)


def log_softmax_backward(dev, y, g):
    return _softmax_grad(dev, y, g, 1)


def softmax_cross_entropy(dev, logits, targets, grad=None):
    count, n = logits.shape
    lse, loss = dev.empty((count, 2)), dev.empty(())      # (each row's max and log sum)
    if not count:                                # (the mean of no rows, as 0 / 0)
        dev.fill(loss, float("nan"))
        return loss, lse
    with dev.lock:        # (workspace ranges taken for it) the rows' losses, summed in it
        outs = [lse, loss] if grad is None else [lse, loss, grad]
        per_row, writes = dev.workspace.partials((count,), outs)
        dev.launch("softmax", (0, 0, 1, int(grad is not None)),
                   push_constants((logits.address, grad.address if grad is not None else 0, 0,
                                   per_row, targets.address, lse.address,
                                   dev.workspace.take(COUNTER, 1), loss.address), (count, n)),
                   (min(count, MAX_GROUPS), 1, 1), [logits, targets], writes)
    return loss, lse


def softmax_cross_entropy_backward(dev, logits, targets, lse, g):
    count, n = logits.shape
    out = dev.empty(logits.shape)
    dev.launch("xent_backward", (), push_constants((logits.address, targets.address,
                                                    lse.address, g.address, out.address),
                                                   (count, n)),
               grid(out.size), [logits, targets, lse, g], [out])
    return out
