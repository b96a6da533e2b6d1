"""Broadcasting binary ops (x op y) and their backward kernels: the twin of
``shaders/binary.comp``.

Each element is computed in float64 and rounded once to the output dtype: for + - * / on
float32 inputs that gives exactly the float32 result (double rounding through float64 is
innocuous for them), so those ops are bit-exact twins of a float32 shader.

A kernel is compiled per op, its code (``dualgrad.kernel_ops``) captured in a closure: Numba
freezes it into a constant and LLVM drops the other ops' branches, so the loops are as fast
as one written per op.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..backend import mixed_side
from ..kernel_ops import BINARY
from ..shapes import broadcast_strides, contiguous_strides, pieces
from . import convert16, split
from .jit import fma_kernel, kernel, scalar
from .vmath import vatan2

ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM, ATAN2, FMOD, REMAINDER, FLOOR_DIVIDE = BINARY.codes(
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "fmod", "remainder",
    "floor_divide")


@scalar
def _fast_mod(x, y):
    """C's fmod for float32 operands whose quotient is below 2^14, else NaN: trunc(x / y)
    in float64 is then the truncated quotient q (x / y is at least 2^-25 / q from an
    integer, far more than float64's rounding), and x - q y is exact (at most 39 bits). A
    form without branches, which vectorises, where the library's fmod is a loop."""
    q = np.trunc(x / y)
    mod = math.copysign(x - q * y, x)
    return mod if (abs(q) < 16384.0) & (abs(y) < math.inf) else math.nan


@scalar
def fmod_of(x, y):
    """C's fmod, exact."""
    mod = _fast_mod(x, y)
    return mod if mod == mod else np.fmod(x, y)


@scalar
def _differs(mod, y):
    """Whether a nonzero fmod's sign is not y's (Python's remainder then adds y)."""
    return (mod != 0.0) & ((mod < 0.0) != (y < 0.0))


@scalar
def _remainder_from(mod, y):
    return mod + y if _differs(mod, y) else mod


@scalar
def _quotient_from(x, y, mod, floored):
    """The truncated quotient that makes x - mod (rounded to an integer; its zero signed as
    x / y), one less where ``floored`` and the remainder's sign differs from y's."""
    q = np.rint((x - mod) / y)
    q = q - 1.0 if floored & _differs(mod, y) else q
    return q if q != 0.0 else math.copysign(0.0, x) * math.copysign(1.0, y)


@scalar
def integer_quotient(x, y, floored):
    """trunc(x / y) from the exact fmod, or, ``floored``, PyTorch's floor_divide: rounded
    toward -inf; x / y where y is 0; NaN where x is infinite."""
    if x != x or y != y:
        return x + y
    if y == 0.0 or math.isinf(x):
        if floored and math.isinf(x) and y != 0.0:
            return math.nan
        return np.trunc(x / y)
    return _quotient_from(x, y, fmod_of(x, y), floored)


@scalar
def remainder_of(x, y):
    """fmod, then + y where it is nonzero and its sign is not y's (Python's rule)."""
    return _remainder_from(fmod_of(x, y), y)


@scalar
def binary_scalar(op, x, y):
    if op == ADD:
        return x + y
    if op == SUB:
        return x - y
    if op == MUL:
        return x * y
    if op == DIV:
        return x / y
    if op == POW:
        return math.pow(x, y)
    if op == MAXIMUM:
        return x if (x > y or x != x) else y     # NaN propagates from either side
    if op == ATAN2:
        return vatan2(x, y)
    if op == FMOD:
        return fmod_of(x, y)
    if op == REMAINDER:
        return remainder_of(x, y)
    if op == FLOOR_DIVIDE:
        return integer_quotient(x, y, True)
    # MINIMUM
    return x if (x < y or x != x) else y


@scalar
def binary_grad_scalar(op, x, y, g):
    """(dL/dx, dL/dy) for one element of x op y, given g = dL/d(x op y)."""
    if op == ADD:
        return g, g
    if op == SUB:
        return g, -g
    if op == MUL:
        return g * y, g * x
    if op == DIV:
        return g / y, -g * x / (y * y)
    if op == POW:
        gx = 0.0 if y == 0.0 else g * y * math.pow(x, y - 1.0)
        # d/dy x**y = x**y log x; PyTorch masks it to 0 where x == 0 and y >= 0.
        gy = 0.0 if (x == 0.0 and y >= 0.0) else g * math.pow(x, y) * math.log(x)
        return gx, gy
    if op == ATAN2:                              # (no overflow: float32 squared in float64)
        # 0 at the origin, as PyTorch's (where 1 / (x^2 + y^2) would make 0 times inf)
        r = 0.0 if (x == 0.0 and y == 0.0) else 1.0 / (x * x + y * y)
        return g * y * r, -g * x * r
    if op == FMOD:
        return g, -g * integer_quotient(x, y, False)
    if op == REMAINDER:
        return g, -g * integer_quotient(x, y, True)
    if op == FLOOR_DIVIDE:
        return 0.0, 0.0                          # (a step function)
    # ties split the gradient, and a NaN on either side gives it all to both (neither is
    # below the other), as in PyTorch
    if x == y:
        return 0.5 * g, 0.5 * g
    if op == MAXIMUM:
        return 0.0 if x < y else g, 0.0 if x > y else g
    return 0.0 if x > y else g, 0.0 if x < y else g          # MINIMUM


# ---------------------------------------------------------------------------------------------
# Kernel factories: one compiled (and cached) kernel per op. Arrays arrive flattened; a
# broadcast operand comes with 4-D element strides (0 along a broadcast axis), read into
# locals before the loops so the compiler can vectorise the inner one.

@scalar
def _quotient_fast(op, x, y):
    """fmod, remainder or floor_divide where _fast_mod applies, else NaN (the elements then
    left to binary_scalar)."""
    mod = _fast_mod(x, y)
    if op == FMOD:
        return mod
    if op == REMAINDER:
        return _remainder_from(mod, y)
    return _quotient_from(x, y, mod, True)


def _binary_kernels(op):
    def binary_flat(x, y, out):
        if op == FMOD or op == REMAINDER or op == FLOOR_DIVIDE:
            for i in range(out.size):         # the common case, vectorised; then the rest
                out[i] = _quotient_fast(op, np.float64(x[i]), np.float64(y[i]))
            for i in range(out.size):
                if out[i] != out[i]:
                    out[i] = binary_scalar(op, np.float64(x[i]), np.float64(y[i]))
            return
        for i in range(out.size):
            out[i] = binary_scalar(op, np.float64(x[i]), np.float64(y[i]))

    def binary_strided(x, y, out, shape, sx, sy, first, last):
        n1, n2, n3 = shape[1], shape[2], shape[3]
        x0, x1, x2, x3 = sx[0], sx[1], sx[2], sx[3]
        y0, y1, y2, y3 = sy[0], sy[1], sy[2], sy[3]
        for row in range(first, last):                # one row = one run along the last axis
            i0, i1, i2 = row // (n1 * n2), (row // n2) % n1, row % n2
            bx = i0 * x0 + i1 * x1 + i2 * x2
            by = i0 * y0 + i1 * y1 + i2 * y2
            o = row * n3
            os = out[o:o + n3]            # contiguous runs, or one operand's number along the
            if x3 == 1 and y3 == 1:       # run (a bias row; a channel's bias): slices
                xs, ys = x[bx:bx + n3], y[by:by + n3]                       # vectorise
                for i3 in range(n3):
                    os[i3] = binary_scalar(op, np.float64(xs[i3]), np.float64(ys[i3]))
                continue
            if x3 == 1 and y3 == 0:
                xs, yv = x[bx:bx + n3], np.float64(y[by])
                for i3 in range(n3):
                    os[i3] = binary_scalar(op, np.float64(xs[i3]), yv)
                continue
            if x3 == 0 and y3 == 1:
                xv, ys = np.float64(x[bx]), y[by:by + n3]
                for i3 in range(n3):
                    os[i3] = binary_scalar(op, xv, np.float64(ys[i3]))
                continue
            for i3 in range(n3):
                out[o + i3] = binary_scalar(op, np.float64(x[bx + i3 * x3]),
                                            np.float64(y[by + i3 * y3]))
    # atan2's polynomials may fuse their multiply-adds (as the unary kernels of vmath's
    # functions do: the same float32 results); the other ops' arithmetic stays as written
    compiled = fma_kernel if op == ATAN2 else kernel
    return compiled(binary_flat), compiled(binary_strided)


def _binary_grad_kernel(op):
    def binary_grad_kernel(x, y, g, gx, gy, shape, sx, sy):
        n1, n2, n3 = shape[1], shape[2], shape[3]
        x0, x1, x2, x3 = sx[0], sx[1], sx[2], sx[3]
        y0, y1, y2, y3 = sy[0], sy[1], sy[2], sy[3]
        for row in range(shape[0] * n1 * n2):
            i0, i1, i2 = row // (n1 * n2), (row // n2) % n1, row % n2
            bx = i0 * x0 + i1 * x1 + i2 * x2
            by = i0 * y0 + i1 * y1 + i2 * y2
            o = row * n3
            for i3 in range(n3):
                da, db = binary_grad_scalar(op, np.float64(x[bx + i3 * x3]),
                                            np.float64(y[by + i3 * y3]),
                                            np.float64(g[o + i3]))
                gx[o + i3] = da
                gy[o + i3] = db
    return kernel(binary_grad_kernel)


_BINARY = [_binary_kernels(op.code) for op in BINARY]
_BINARY_GRAD = [_binary_grad_kernel(op.code) for op in BINARY]


@functools.cache                       # (made at first use: an op and type at a time)
def _binary16_kernel(op, kind):
    """x op y of two 16-bit arrays of one shape (their bits, as uint16), in one pass: the
    same bits as widening them, the flat float32 kernel and rounding."""
    def binary16(x, y, out):
        for i in range(out.size):
            a = np.float64(convert16.from16(x[i], kind))
            b = np.float64(convert16.from16(y[i], kind))
            if op == FMOD or op == REMAINDER or op == FLOOR_DIVIDE:
                v = _quotient_fast(op, a, b)
                if v != v:
                    v = binary_scalar(op, a, b)
            else:
                v = binary_scalar(op, a, b)
            out[i] = convert16.to16(np.float32(v), kind)
    return (fma_kernel if op == ATAN2 else kernel)(binary16)    # (as the float32 kernels)


# ---------------------------------------------------------------------------------------------
# Entry points.

def _walk(x_shape, y_shape, shape):
    """The 4-D pieces of a broadcast walk over ``shape`` (``shapes.pieces``)."""
    return pieces(tuple(shape), (broadcast_strides(x_shape, shape),
                                 broadcast_strides(y_shape, shape), contiguous_strides(shape)))


def binary(op: str, x: np.ndarray, y: np.ndarray, out=None) -> np.ndarray:
    """x op y with NumPy broadcasting; of float16 or bfloat16 operands of one shape, the
    float32 results rounded to their type (binary.comp's LOW forms); of a float32 and a
    16-bit operand of one shape, the latter widened (its MIXED forms)."""
    if x.dtype != y.dtype and 2 in (x.dtype.itemsize, y.dtype.itemsize):
        if mixed_side(x, y) == 1:
            y = convert16.widen(y)
        else:
            x = convert16.widen(x)
    if x.dtype in convert16.KIND:
        out = np.empty_like(x) if out is None else out
        split.run(_binary16_kernel(BINARY.code[op], convert16.KIND[x.dtype]),
                  convert16.bits(x, y, out))
        return out
    shape = np.broadcast_shapes(x.shape, y.shape)
    out = np.empty(shape, np.result_type(x, y)) if out is None else out
    flat, strided = _BINARY[BINARY.code[op]]
    if x.shape == y.shape:
        split.run(flat, (x.reshape(-1), y.reshape(-1), out.reshape(-1)))
    elif out.size:
        xf, yf, of = x.reshape(-1), y.reshape(-1), out.reshape(-1)
        for s4, (sx, sy, _), (ox, oy, oo) in _walk(x.shape, y.shape, shape):
            xp, yp, dst = xf[ox:], yf[oy:], of[oo:]
            rows = int(s4[0]) * int(s4[1]) * int(s4[2])
            split.run_ranges(lambda lo, hi: strided(xp, yp, dst, s4, sx, sy, lo, hi),
                             split.cuts(rows, rows * int(s4[3])))
    return out


def binary_backward(op: str, x: np.ndarray, y: np.ndarray, g: np.ndarray):
    """(dL/dx, dL/dy) of x op y, both in the broadcast shape (the caller sums them down);
    of 16-bit operands and gradient, rounded to their type as ``binary``'s."""
    if g.dtype in convert16.KIND:
        wide = binary_backward(op, *(convert16.widen(v) for v in (x, y, g)))
        return tuple(convert16.narrow(v, g.dtype) for v in wide)
    gx, gy = np.empty_like(g), np.empty_like(g)
    if g.size:
        xf, yf, gf, gxf, gyf = (a.reshape(-1) for a in (x, y, g, gx, gy))
        for s4, (sx, sy, _), (ox, oy, og) in _walk(x.shape, y.shape, g.shape):
            _BINARY_GRAD[BINARY.code[op]](xf[ox:], yf[oy:], gf[og:], gxf[og:], gyf[og:], s4,
                                          sx, sy)
    return gx, gy
