"""Reductions: reduce.comp (sum, mean, max, prod, min, the sums of squares and of
exponentials over any axes, and the ties of a max or min) and reduce_backward.comp; the
twins of ``dualgrad/cpu/reduce.py``. How a reduction is cut into passes is size arithmetic
(``reduce_passes``, over ``plans.reduce_plan``), cached per shape: every reduction asks."""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ...kernel_ops import COUNT_EQ, REDUCE, REDUCE_BACKWARD
from ...shapes import keepdims_shape, pad4, reduced_shape, strides4
from .. import plans
from ..dispatch import MAX_GROUPS, grid, packed_uints, packer, push_constants
from ..workspace import COUNTER, COUNTERS

SUM, MEAN, MAX, MIN, SUM_SQUARES, SUM_EXP, VAR = REDUCE.codes(
    "sum", "mean", "max", "min", "sum_squares", "sum_exp", "var")
VAR_PARTIALS = 3        # the floats of an item's statistics a variance leaves (reduce.comp)
_ADDRESSES5 = packer(5)
# A split reduction finishes in its own dispatch (reduce.comp's FINISH: the last item of
# an output combines the partial results) where a counter per output fits in COUNTERS and,
# when one thread runs an item, that thread has at most FINISH_SPLITS partial results to
# combine alone; otherwise a second pass combines them.
FINISH_SPLITS = 64


class ReducePass(NamedTuple):
    """One dispatch of reduce.comp, all but its addresses."""
    spec: tuple                   # specialization constants
    uints: tuple                  # push constants after the five addresses
    groups: tuple
    partials: tuple | None        # the shape of the partial results it writes; None: the output
    finish: bool = False          # it also combines them into the output
    tail: bytes = b""             # uints, packed


@functools.lru_cache(maxsize=4096)      # called on every reduction
def reduce_passes(code: int, n_out: int, count: int, total: int, inner: int | None,
                  maps: tuple | None, planner, centered: bool = False) -> tuple:
    """Reduce ``count`` elements into each of ``n_out`` outputs (``total``: the count a mean
    divides by; a variance's divisor as float32 bits). ``inner``: the input is
    [outer][count][inner], or None to index it through the 4-D ``maps``. A split reduction
    writes (splits, n_out) partial results and combines them in the same dispatch (FINISH)
    where it can, else in a second pass (a mean divides only there; tie counts and the
    partial sums of squares or exponentials are summed there). ``centered``: a sum of
    squares or exponentials about y, one value an output (reduce.comp's CENTERED). A
    variance is never split where it cannot finish in its dispatch (``_var_plan``)."""
    plan = planner(n_out, count, inner == 1)
    if code == VAR and plan.group_items and plan.chunk > plans.VAR_RUN:
        plan = plans.ReducePlan(True, -(-count // plans.VAR_RUN), plans.VAR_RUN)
    final = plan.splits == 1
    finish = not final and n_out <= COUNTERS and (plan.group_items or
                                                  plan.splits <= FINISH_SPLITS)
    if code == VAR and not (final or finish):
        plan = _var_plan(n_out, count)
        final, finish = plan.splits == 1, plan.splits > 1
    first = SUM if code == MEAN and not (final or finish) else code
    vec = inner == 1 and count % 4 == 0
    items = plan.splits * n_out
    groups = min(items, MAX_GROUPS) if plan.group_items else grid(items)[0]
    uints = (n_out, count, plan.splits, plan.chunk, total, inner or 1,
             *(maps if inner is None else (1,) * 16))
    partials = (plan.splits, n_out) if code != VAR else (plan.splits, n_out, VAR_PARTIALS)
    this = ReducePass((first, int(plan.group_items), int(inner is not None), int(vec),
                       int(finish), int(centered)), uints, (groups, 1, 1),
                      None if final else partials, finish, packed_uints(uints))
    if final or finish:
        return (this,)
    second = SUM if code in (COUNT_EQ, SUM_SQUARES, SUM_EXP) else code
    return (this,) + reduce_passes(second, n_out, plan.splits, total, n_out, None, planner)


def _var_plan(n_out: int, count: int):
    """A variance's plan where the planner's would need a second pass: the planner's plan
    of workgroup items (which walk strided runs too, and whose last item finishes the
    output in the dispatch) where a counter an output fits, else one thread an output. (A
    few threads walking long strided runs instead, as for a variance over the batch axis
    of (N, 3), left most of the GPU idle.)"""
    if n_out > COUNTERS:
        return plans.ReducePlan(False, 1, (count + 3) // 4 * 4)
    return plans.reduce_plan(n_out, count, True)


@functools.lru_cache(maxsize=4096)      # called on every reduction
def reduce_recipe(code: int, shape: tuple, axes: tuple, planner,
                  centered: bool = False, divisor: float | None = None) -> tuple:
    """The passes that reduce an array of ``shape`` over ``axes`` (none when the result
    is empty); ``divisor``: a variance's."""
    x4 = pad4(shape)
    lead = 4 - len(shape)
    reduced = frozenset(a + lead for a in axes)
    st = strides4(x4)
    kd = [1 if d in reduced else int(x4[d]) for d in range(4)]
    rd = [int(x4[d]) if d in reduced else 1 for d in range(4)]
    n_out, count = math.prod(kd), math.prod(rd)
    if not n_out:
        return ()
    total = count if divisor is None else _float_bits(divisor)
    return reduce_passes(code, n_out, count, total, plans.reduce_layout(x4, reduced),
                         (*kd, *st, *rd, *st), planner, centered)


def _float_bits(value: float) -> int:
    """value rounded to float32, as its bits (a uint push constant)."""
    return int(np.float32(value).view(np.uint32))


def _run(dev, passes, x, y, out) -> None:
    """Dispatch reduce.comp ``passes`` from x (and y, for tie counts or centers) into out."""
    for p in passes:
        y_address = y.address if y is not None else 0
        if p.finish:
            with dev.lock:              # (a workspace range taken for this dispatch)
                partials, writes = dev.workspace.partials(p.partials, [out])
                counters = dev.workspace.take(COUNTER, p.uints[0])     # one per output
                dev.launch("reduce", p.spec,
                           _ADDRESSES5.pack(x.address, y_address, partials, out.address,
                                            counters) + p.tail,
                           p.groups, [x, y], writes)
            return
        dest = out if p.partials is None else dev.empty(p.partials)
        dev.launch("reduce", p.spec,
                   _ADDRESSES5.pack(x.address, y_address, dest.address, 0, 0) + p.tail,
                   p.groups, [x, y], [dest])
        x, y = dest, None


def reduce_into(dev, code: int, x, y, out, axes, centered: bool = False,
                divisor: float | None = None) -> None:
    """The reduction ``code`` (REDUCE's, or COUNT_EQ with y the maximum or minimum; a sum
    of squares or exponentials about y where ``centered``; a variance over ``divisor``)
    of x over axes."""
    _run(dev, reduce_recipe(code, x.shape, tuple(axes), plans.reduce_plan, centered,
                            divisor), x, y, out)


def reduce(dev, op, x, axes, keepdims=False, out=None, center=None, divisor=None):
    code = REDUCE.code[op]
    if code == VAR and divisor is None:
        raise ValueError("reduce: var needs a divisor")
    if out is None:
        out = dev.empty(reduced_shape(x.shape, tuple(axes), keepdims))
    reduce_into(dev, code, x, center, out, axes, center is not None,
                None if code != VAR else float(divisor))
    return out


def reduce_backward(dev, op, x, y, g, axes):
    if op not in REDUCE_BACKWARD:
        raise ValueError(f"reduce_backward: no kernel for {op!r}; expected one of "
                         f"{REDUCE_BACKWARD}")
    out = dev.empty(x.shape)
    if not x.size:
        return out
    code = REDUCE.code[op]
    ties = None
    if code in (MAX, MIN):
        ties = dev.empty(y.shape)
        reduce_into(dev, COUNT_EQ, x, y, ties, axes)
    x4 = pad4(x.shape)
    os_ = strides4(pad4(keepdims_shape(x.shape, axes)))
    lead = 4 - len(x.shape)
    for a in axes:
        os_[a + lead] = 0
    divisor = float(math.prod(x.shape[a] for a in axes))
    dev.launch("reduce_backward", (code,),
               push_constants((x.address, y.address, g.address,
                               ties.address if ties is not None else 0, out.address),
                              (x.size, *map(int, x4), *os_), (divisor,)),
               grid(x.size), [x, y, g, ties], [out])
    return out
