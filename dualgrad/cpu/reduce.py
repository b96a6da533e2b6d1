"""Reductions (sum, mean, max, prod, min, the sums of squares and of exponentials over any
axes, with keepdims) and the backward kernels of sum, mean, max and min.

Sums accumulate in float64 and are rounded once to the output dtype, so the reference carries
no float32 rounding until the end, in a fixed order of accumulation (a sum of squares squares
each element in float64 too: exactly, for float32 ones). A sum of squares may be taken about
a center, one per output (a variance's mean): the sum of (x - center)^2, x - center formed
in float64 as it is read, so nothing is written out; a sum of exponentials, of
exp(x - center) (a log-sum-exp's, the center its maximum), likewise. The kernels take the
centers as an array and a stride (0: one center for all, ``_NO_CENTER``'s 0 where there is
none).

When the reduced axes are consecutive the input is read as (outer, reduced, inner):

- inner > 1 (e.g. a bias gradient, the sum over the batch axis): each output adds its
  inputs one after another in row-major order; four whole rows are added a pass.
- inner == 1 (the reduced elements of an output are contiguous, e.g. a sum of everything):
  the run is summed in ``LANES`` interleaved partial sums (element j into lane j % LANES),
  which are then added in a fixed order (folded in halves); independent lanes let the loop
  use vector registers instead of waiting on one long chain of additions.

Big reductions of runs (inner == 1) run on every core (``split``), cut where the bits
cannot depend on the cut: between runs, each made by one thread in its own order; one run
of 2 ``CHUNK`` elements or more into chunks fixed by its length alone (not by the cores),
each reduced in lanes, and the chunks' results reduced in lanes in turn, a fixed order
again. A sum of 4M elements, as one run or as rows of 4096: 0.43-0.51 -> 0.30-0.36 ms on
two cores (PyTorch's float32 sums take 0.11-0.13: ours add in float64). Sums over leading
axes (inner > 1) stay on one thread: cut by columns across two cores, (4096, 1024) over
axis 0 went 0.40 -> 0.53 ms.

Other axis sets (e.g. axes 0 and 2 of a 3-D input) read the input as 4-D and add each
element into the output element its index maps to, in row-major order. Where the last axis
is among them (a convolution's bias gradient: axes 0, 2 and 3), the trailing reduced axes
are reduced first as runs (above), then the rest.

A max does not depend on order (``max_of``): NaN wins, and -0 against +0 gives +0, on both
backends, so however either splits the work the results agree bit for bit. A float32 max over
contiguous runs compares the elements' bits as integers (``_max_runs_f32``): integer max
reductions vectorise eight elements to an instruction with no float64 conversion. A min is
-max(-x) in one pass (-0 against +0 gives -0): the bits' kernels flip the sign bit as they
read and negate the result.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types

from ..kernel_ops import REDUCE, REDUCE_BACKWARD
from ..shapes import keepdims_shape, pad4, reduced_count
from . import split as split_
from .jit import kernel, scalar
from .vmath import bitcast, vexp

SUM, MEAN, MAX, PROD, MIN, SUM_SQUARES, SUM_EXP, VAR = REDUCE.codes(
    "sum", "mean", "max", "prod", "min", "sum_squares", "sum_exp", "var")
LANES = 64      # interleaved partial results along a contiguous run
CHUNK = 1 << 16     # a run this long or longer is reduced in chunks of about this many
_INF_BITS = 0x7F800000          # +inf's float32 bits; above them (as int32): positive NaNs
_NEG_INF_BITS = 0xFF800000      # -inf's; above them (as uint32): negative NaNs
_as_float32 = bitcast(types.int32, types.float32)
_as_float32_u = bitcast(types.uint32, types.float32)
_SIGN, _SIGN_U = np.int32(-2 ** 31), np.uint32(2 ** 31)     # the sign bit, to flip as read
_NO_CENTER = np.zeros(1)


@scalar
def _start(op):
    return -math.inf if op == MAX else math.inf if op == MIN else 1.0 if op == PROD else 0.0


@scalar
def max_of(a, b):
    """The larger of a and b, NaN if either is, and +0 for -0 against +0: a max that does
    not depend on the order it meets its elements in (both backends' rule). Numba compiles
    np.maximum and these conditions to selects, which vectorise."""
    m = np.maximum(a, b)
    return a + b if (a == b) & (a == 0.0) else m      # -0 + +0 = +0; -0 + -0 = -0


@scalar
def min_of(a, b):
    """-max_of(-a, -b): NaN wins, -0 against +0 gives -0."""
    return -max_of(-a, -b)


@scalar
def _term(op, v, center):
    """An element as the reduction takes it, in float64: (v - center)^2 for a sum of
    squares, exp(v - center) for a sum of exponentials."""
    w = np.float64(v)
    if op == SUM_SQUARES:
        d = w - center
        return d * d
    if op == SUM_EXP:
        return vexp(w - center)
    return w


def _partials_code(code: int) -> int:
    """The reduction that combines partial results of ``code``: a sum of squares or of
    exponentials adds its partial sums."""
    return SUM if code in (SUM_SQUARES, SUM_EXP) else code


@scalar
def _combine(op, acc, v):
    """acc op v: a sum adds (in the order of the calls), a product multiplies, a max takes
    max_of, a min min_of."""
    if op == MAX:
        return max_of(acc, v)
    if op == MIN:
        return min_of(acc, v)
    if op == PROD:
        return acc * v
    return acc + v


@scalar
def _lane(op, acc, v):
    """One step of a lane: a sum adds; a max takes np.maximum, a min np.minimum (NaN wins,
    the earlier of -0 and +0 stays: _lanes settles the sign of a zero result afterwards),
    which is cheaper than max_of in the loop that touches every element."""
    if op == MAX:
        return np.maximum(acc, v)
    if op == MIN:
        return np.minimum(acc, v)
    if op == PROD:
        return acc * v
    return acc + v


@scalar
def _lanes(op, x, lo, hi, lanes, center):
    """The reduction of x[lo:hi]: element lo + j goes into lane j % LANES, the lanes are
    folded in halves (lane k with lane k + half: a few vector steps, where adding them one
    by one would be a chain as long as the lanes), then the leftover tail is combined in
    order."""
    full = lo + (hi - lo) // LANES * LANES
    lanes[:] = _start(op)
    for j in range(lo, full, LANES):
        block = x[j:j + LANES]
        for k in range(LANES):
            lanes[k] = _lane(op, lanes[k], _term(op, block[k], center))
    half = LANES // 2
    while half:
        for k in range(half):
            lanes[k] = _lane(op, lanes[k], lanes[k + half])
        half //= 2
    total = lanes[0]
    if op != MAX and op != MIN:
        for j in range(full, hi):
            total = _combine(op, total, _term(op, x[j], center))
        return total
    for j in range(full, hi):             # (any order gives the same max or min)
        total = _lane(op, total, np.float64(x[j]))
    if total == 0.0:    # max_of's rule: +0 if any zero is +0; min_of's: -0 if any is -0
        rule = 1.0 if op == MAX else -1.0
        for j in range(lo, hi):
            if x[j] == 0.0 and math.copysign(1.0, x[j]) == rule:
                return rule * 0.0
        return -rule * 0.0
    return total


@scalar
def _max_f32_from_bits(top, utop, bottom):
    """max_of over a non-empty float32 run, from its bits' signed max ``top``, unsigned max
    ``utop`` and (needed only when ``top`` < 0) signed min ``bottom``. As int32,
    non-negative floats (+0 = 0, positive NaNs above +inf) order as their bits and lie above
    every negative one; negative floats order the other way (-0 is the smallest int32), and
    negative NaNs are the largest bits as uint32. None of this depends on element order."""
    if top > _INF_BITS:                   # a positive NaN
        return np.float64(_as_float32(top))
    if utop > _NEG_INF_BITS:              # a negative NaN
        return np.float64(_as_float32_u(utop))
    # the largest non-negative element (+0 beats -0), else the negative of least magnitude
    return np.float64(_as_float32(top if top >= 0 else bottom))


@kernel
def _max_runs_f32(x, acc, n, negate):
    """acc[r] = the max of x[r * n:(r + 1) * n] for a contiguous float32 x (-inf if n = 0):
    one pass of a signed and an unsigned integer max over the bits, and a second pass for
    the signed min only when every element is negative. The loops stay in this body over
    slices: so they vectorise and the rows cost no calls. With ``negate``, the min: -(the
    max of -x), the sign bits flipped as read."""
    s, u = x.view(np.int32), x.view(np.uint32)
    flip, uflip = (_SIGN, _SIGN_U) if negate else (np.int32(0), np.uint32(0))
    for r in range(acc.size):
        row, urow = s[r * n:(r + 1) * n], u[r * n:(r + 1) * n]
        top, utop, bottom = np.int32(-2 ** 31), np.uint32(0), np.int32(2 ** 31 - 1)
        for j in range(n):
            top = max(top, np.int32(row[j] ^ flip))
            utop = max(utop, np.uint32(urow[j] ^ uflip))
        if top < 0:
            for j in range(n):
                bottom = min(bottom, np.int32(row[j] ^ flip))
        m = _max_f32_from_bits(top, utop, bottom) if n else -math.inf
        acc[r] = -m if negate else m


@kernel
def _max_stats_f32(x, stats, chunks, negate):
    """For each of ``chunks`` equal parts of the contiguous float32 x (chunk c: elements
    [c n // chunks, (c + 1) n // chunks)): its bits' signed max, unsigned max and (where
    the signed max is negative) signed min, into stats[c] (int64): combined by max, max
    and min, they are the whole run's (``_max_f32_from_bits``); of -x with ``negate``.
    (The loops are ``_max_runs_f32``'s, written out in each body: one function returning
    the three made both 5-10% slower.)"""
    s, u = x.view(np.int32), x.view(np.uint32)
    flip, uflip = (_SIGN, _SIGN_U) if negate else (np.int32(0), np.uint32(0))
    n = x.size
    for c in range(stats.shape[0]):
        lo, hi = c * n // chunks, (c + 1) * n // chunks
        row, urow = s[lo:hi], u[lo:hi]
        top, utop, bottom = np.int32(-2 ** 31), np.uint32(0), np.int32(2 ** 31 - 1)
        for j in range(hi - lo):
            top = max(top, np.int32(row[j] ^ flip))
            utop = max(utop, np.uint32(urow[j] ^ uflip))
        if top < 0:
            for j in range(hi - lo):
                bottom = min(bottom, np.int32(row[j] ^ flip))
        stats[c, 0], stats[c, 1], stats[c, 2] = top, utop, bottom


@kernel
def _max_from_stats(stats, acc, negate):
    top, utop, bottom = np.int32(-2 ** 31), np.uint32(0), np.int32(2 ** 31 - 1)
    for c in range(stats.shape[0]):
        top = max(top, np.int32(stats[c, 0]))
        utop = max(utop, np.uint32(stats[c, 1]))
        bottom = min(bottom, np.int32(stats[c, 2]))
    m = _max_f32_from_bits(top, utop, bottom)
    acc[0] = -m if negate else m


def _out_strides(shape, axes) -> np.ndarray:
    """4-D strides into the keepdims output for an input of `shape`: 0 on reduced axes."""
    kept = pad4(keepdims_shape(shape, axes))
    reduced = set(a + 4 - len(shape) for a in axes)
    strides, step = np.zeros(4, np.int64), 1
    for axis in range(3, -1, -1):
        strides[axis] = 0 if axis in reduced else step
        step *= int(kept[axis])
    return strides


def _reduce_kernel(op):
    def reduce_kernel(x, acc, shape, so, center, cs):
        acc[:] = _start(op)
        i = 0
        for i0 in range(shape[0]):
            for i1 in range(shape[1]):
                for i2 in range(shape[2]):
                    base = i0 * so[0] + i1 * so[1] + i2 * so[2]
                    for i3 in range(shape[3]):
                        o = base + i3 * so[3]
                        acc[o] = _combine(op, acc[o], _term(op, x[i], center[o * cs]))
                        i += 1
    return kernel(reduce_kernel)


def _reduce_grad_kernel(op):
    def reduce_grad_kernel(x, y, g, out, count, divisor, shape, so):
        if op == MAX or op == MIN:
            count[:] = 0.0
            i = 0
            for i0 in range(shape[0]):
                for i1 in range(shape[1]):
                    for i2 in range(shape[2]):
                        base = i0 * so[0] + i1 * so[1] + i2 * so[2]
                        for i3 in range(shape[3]):
                            o = base + i3 * so[3]
                            if x[i] == y[o]:
                                count[o] += 1.0
                            i += 1
        i = 0
        for i0 in range(shape[0]):
            for i1 in range(shape[1]):
                for i2 in range(shape[2]):
                    base = i0 * so[0] + i1 * so[1] + i2 * so[2]
                    for i3 in range(shape[3]):
                        o = base + i3 * so[3]
                        if op == MAX or op == MIN:
                            # Ties share the gradient evenly, and a NaN maximum (equal to
                            # nothing: count 0) gives NaN everywhere, as PyTorch's amax.
                            out[i] = (np.float64(g[o]) / count[o]) * (
                                1.0 if x[i] == y[o] else 0.0)
                        else:
                            out[i] = np.float64(g[o]) / divisor
                        i += 1
    return kernel(reduce_grad_kernel)


def _runs_kernel(op):
    def runs_kernel(x, acc, n, center, cs):
        """acc[r] = the reduction of x[r * n:(r + 1) * n]."""
        lanes = np.empty(LANES)
        for r in range(acc.size):
            acc[r] = _lanes(op, x, r * n, (r + 1) * n, lanes, center[r * cs])
    return kernel(runs_kernel)


def _chunks_kernel(op):
    def chunks_kernel(x, partial, chunks, c_lo, c_hi, center):
        """partial[c] = the reduction of chunk c of x (elements [c n // chunks, (c + 1) n //
        chunks)), for c in [c_lo, c_hi)."""
        lanes = np.empty(LANES)
        n = x.size
        for c in range(c_lo, c_hi):
            partial[c] = _lanes(op, x, c * n // chunks, (c + 1) * n // chunks, lanes,
                                center)
    return kernel(chunks_kernel)


def _rows_kernel(op):
    def rows_kernel(x, acc, n, inner, center, cs):
        """acc[a, :] = the reduction over m of x[a, m, :], x and acc flattened. Rows are
        taken four to a pass over the output: each output element still meets its rows in
        order m = 0, 1, 2, ... (the same sums, bit for bit), but is loaded and stored once a
        pass instead of once a row."""
        for a in range(acc.size // inner):
            out = acc[a * inner:(a + 1) * inner]
            out[:] = _start(op)
            start = a * n
            m = 0
            while m + 4 <= n:
                r0 = x[(start + m) * inner:(start + m + 1) * inner]
                r1 = x[(start + m + 1) * inner:(start + m + 2) * inner]
                r2 = x[(start + m + 2) * inner:(start + m + 3) * inner]
                r3 = x[(start + m + 3) * inner:(start + m + 4) * inner]
                for b in range(inner):
                    c = center[(a * inner + b) * cs]
                    v = _combine(op, out[b], _term(op, r0[b], c))
                    v = _combine(op, v, _term(op, r1[b], c))
                    v = _combine(op, v, _term(op, r2[b], c))
                    out[b] = _combine(op, v, _term(op, r3[b], c))
                m += 4
            while m < n:
                row = x[(start + m) * inner:(start + m + 1) * inner]
                for b in range(inner):
                    c = center[(a * inner + b) * cs]
                    out[b] = _combine(op, out[b], _term(op, row[b], c))
                m += 1
    return kernel(rows_kernel)


_KERNEL_OPS = [op.code for op in REDUCE if op.code != VAR]    # (var: a sum, then squares)
_REDUCE = [_reduce_kernel(code) for code in _KERNEL_OPS]
_RUNS = [_runs_kernel(code) for code in _KERNEL_OPS]
_CHUNKS = [_chunks_kernel(code) for code in _KERNEL_OPS]
_ROWS = [_rows_kernel(code) for code in _KERNEL_OPS]
_REDUCE_GRAD = {REDUCE.code[op]: _reduce_grad_kernel(REDUCE.code[op]) for op in REDUCE_BACKWARD}


def _consecutive(shape, axes):
    """(outer, reduced, inner) element counts when ``axes`` are consecutive, else None."""
    if not axes:
        return 1, 1, math.prod(shape)
    if tuple(axes) != tuple(range(axes[0], axes[-1] + 1)):
        return None
    first, last = axes[0], axes[-1] + 1
    return math.prod(shape[:first]), math.prod(shape[first:last]), math.prod(shape[last:])


def _reduce_into(code: int, x: np.ndarray, acc: np.ndarray, axes: tuple,
                 center: np.ndarray = _NO_CENTER, cs: int = 0) -> None:
    """acc (float64, the keepdims shape) = the reduction of x over axes; output o's
    center (a sum of squares') is center[o * cs]."""
    split = _consecutive(x.shape, axes)
    if split is None and axes[-1] == x.ndim - 1:
        # The trailing reduced axes as runs first (one output's run in lanes; added into it
        # element by element, each would wait on the addition before), then the rest.
        first = next(a for a in range(x.ndim) if all(b in axes for b in range(a, x.ndim)))
        runs = np.empty(x.shape[:first], np.float64)
        if cs:          # each run's center: its output's
            center = np.ascontiguousarray(np.broadcast_to(
                center.reshape(acc.shape[:first]), runs.shape)).reshape(-1)
        _reduce_into(code, x, runs.reshape(runs.shape + (1,) * (x.ndim - first)),
                     tuple(range(first, x.ndim)), center, cs)
        rest = tuple(a for a in axes if a < first)
        _reduce_into(_partials_code(code), runs, acc.reshape(keepdims_shape(runs.shape, rest)),
                     rest)
    elif split is None:
        _REDUCE[code](x.reshape(-1), acc.reshape(-1), pad4(x.shape),
                      _out_strides(x.shape, axes), center, cs)
    elif split[2] == 1:
        _runs(code, np.ascontiguousarray(x).reshape(-1), acc.reshape(-1), split[1], center,
              cs)
    else:       # (on one thread: cut by columns across two cores, 0.40 -> 0.53 ms)
        _ROWS[code](x.reshape(-1), acc.reshape(-1), split[1], split[2], center, cs)


def _runs(code: int, x, acc, n: int, center, cs: int) -> None:
    """acc[r] = the reduction of run r, x[r n:(r + 1) n]: runs cut across the cores, or a
    long one in chunks fixed by its length (module docstring)."""
    runs = acc.size
    bits = code in (MAX, MIN) and x.dtype == np.float32
    if runs != 1 or n < 2 * CHUNK:      # (no runs: nothing to do)
        if bits:
            def part(lo, hi):
                _max_runs_f32(x[lo * n:hi * n], acc[lo:hi], n, code == MIN)
        else:
            def part(lo, hi):
                _RUNS[code](x[lo * n:hi * n], acc[lo:hi], n, center[lo * cs:hi * cs + 1 - cs],
                            cs)
        split_.run_ranges(part, split_.cuts(runs, x.size))
        return
    chunks = n // CHUNK
    parts = split_.cuts(chunks, x.size)
    if bits:                                      # (max's bits: any cut gives the same)
        stats = np.empty((chunks, 3), np.int64)
        split_.run_ranges(lambda lo, hi: _max_stats_f32(
            x[lo * n // chunks:hi * n // chunks], stats[lo:hi], hi - lo, code == MIN), parts)
        _max_from_stats(stats, acc, code == MIN)
        return
    partial = np.empty(chunks, np.float64)
    split_.run_ranges(lambda lo, hi: _CHUNKS[code](x, partial, chunks, lo, hi, center[0]),
                      parts)
    _RUNS[_partials_code(code)](partial, acc, chunks, _NO_CENTER, 0)


def _var_into(x: np.ndarray, acc: np.ndarray, axes: tuple, divisor: float) -> None:
    """acc = the sum of (x - mean)^2 over axes, about the exact mean (float64, never
    rounded to x's type), divided by ``divisor``."""
    _reduce_into(SUM, x, acc, axes)
    with np.errstate(invalid="ignore", divide="ignore"):   # (no element: NaN, as a mean's)
        mean = (acc / reduced_count(x.shape, axes)).reshape(-1)
    _reduce_into(SUM_SQUARES, x, acc, axes, mean, 1)
    with np.errstate(invalid="ignore", divide="ignore"):   # 0 / 0 = NaN, s / 0 = inf
        acc /= divisor


def reduce(op: str, x: np.ndarray, axes: tuple, keepdims: bool = False,
           center: np.ndarray | None = None, divisor: float | None = None) -> np.ndarray:
    """Sum, mean, max, product, min, sum of squares or of exponentials of x over `axes` (a
    tuple of non-negative axes); about ``center`` (the keepdims shape) where given. var:
    the sum of squares about each output's own mean (float64 throughout), over
    ``divisor``."""
    kshape = keepdims_shape(x.shape, axes)
    acc = np.empty(kshape, np.float64)
    code = REDUCE.code[op]
    if code == VAR and divisor is None:
        raise ValueError("reduce: var needs a divisor")
    if code == VAR:
        if acc.size:
            _var_into(x, acc, axes, float(divisor))
    elif acc.size:
        if center is None:
            _reduce_into(code, x, acc, axes)
        else:
            _reduce_into(code, x, acc, axes, np.ascontiguousarray(center, np.float64)
                         .reshape(-1), 1)
    if code == MEAN:
        with np.errstate(invalid="ignore", divide="ignore"):   # the mean of nothing is NaN
            acc /= reduced_count(x.shape, axes)
    out = acc.astype(x.dtype)
    return out if keepdims else out.reshape(tuple(n for a, n in enumerate(kshape)
                                                  if a not in axes))


def reduce_backward(op: str, x: np.ndarray, y: np.ndarray, g: np.ndarray,
                    axes: tuple) -> np.ndarray:
    """dL/dx of y = reduce(op, x, axes, keepdims=True), given dL/dy = g (keepdims shape)."""
    if op not in REDUCE_BACKWARD:
        raise ValueError(f"reduce_backward: no kernel for {op!r}; expected one of "
                         f"{REDUCE_BACKWARD}")
    out = np.empty_like(x)
    code = REDUCE.code[op]
    n = reduced_count(x.shape, axes)
    scale = float(n) if (code == MEAN and n) else 1.0
    count = np.empty(g.shape, np.float64)
    _REDUCE_GRAD[code](x.reshape(-1), y.reshape(-1), g.reshape(-1), out.reshape(-1),
                       count.reshape(-1), scale, pad4(x.shape), _out_strides(x.shape, axes))
    return out
