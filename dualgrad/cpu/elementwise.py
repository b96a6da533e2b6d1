"""Elementwise kernels: unary ops, ops with scalar parameters, broadcasting binary ops, and
their backward kernels.

Each element is computed in float64 and rounded once to the output dtype. For the basic IEEE
operations (+ - * / sqrt) on float32 inputs that rounding gives exactly the float32 result
(double rounding through float64 is innocuous for them), so those ops are bit-exact twins of
a float32 shader; the transcendental ones land within about half an ULP of the true value,
which makes this backend a sound reference to measure the GPU against.

An op is selected by its code (``dualgrad.kernel_ops``) captured in a closure: Numba freezes closure
variables into constants, prunes the branches of the other ops, caches one compiled kernel
per op, and the loops stay as fast as a hand-written one per op.
"""
from __future__ import annotations

import math

import numpy as np

from ..kernel_ops import BINARY, UNARY
from ..shapes import broadcast_strides, pad4
from . import split
from .jit import fma_kernel, kernel, scalar
from .vmath import vexp, vtanh, vtanh_f32

(NEG, EXP, LOG, SQRT, ABS, RELU, GELU, SIGMOID, TANH, ADD_S, MUL_S, DIV_S, RSUB_S, RDIV_S,
 POW_S, RPOW_S, CLAMP, SILU, SOFTPLUS, SQUARE, SIGN, FLOOR, CEIL, ROUND, TRUNC,
 HARDTANH) = UNARY.codes(
    "neg", "exp", "log", "sqrt", "abs", "relu", "gelu", "sigmoid", "tanh", "add_scalar",
    "mul_scalar", "div_scalar", "rsub_scalar", "rdiv_scalar", "pow_scalar", "rpow_scalar",
    "clamp", "silu", "softplus", "square", "sign", "floor", "ceil", "round", "trunc",
    "hardtanh")
SOFTPLUS_THRESHOLD = 20.0            # PyTorch's default: softplus(x) is x above it
ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM = BINARY.codes(
    "add", "sub", "mul", "div", "pow", "maximum", "minimum")

_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


@scalar
def sigmoid64(x):
    """1 / (1 + e**-x) with no overflow on either side (e**-|x| is at most 1); e**-|x| is 0
    past float64's range (vexp stops at its smallest subnormal), so that x * sigmoid(x) at
    -inf is NaN, as IEEE arithmetic and the shader make it."""
    e = 0.0 if abs(x) >= 745.0 else vexp(-abs(x))     # (NaN takes vexp: NaN)
    return 1.0 / (1.0 + e) if x >= 0.0 else e / (1.0 + e)


@scalar
def unary_scalar(op, x, a, b):
    """y = op(x) for one float64 element; a and b are the op's scalar parameters."""
    if op == NEG:
        return -x
    if op == EXP:
        return vexp(x)
    if op == LOG:
        return math.log(x)
    if op == SQRT:
        return math.sqrt(x)
    if op == ABS:
        return abs(x)
    if op == RELU:
        return 0.0 if x <= 0.0 else x          # NaN passes through, -0 becomes +0
    if op == GELU:       # Phi(x) = erfc(-x / sqrt 2) / 2 keeps its accuracy for x << 0
        return 0.5 * x * math.erfc(-x * _SQRT1_2)
    if op == SIGMOID:
        return sigmoid64(x)
    if op == TANH:
        return vtanh(x)
    if op == SILU:
        return x * sigmoid64(x)
    if op == SOFTPLUS:           # max(x, 0) + log(1 + e**-|x|): nothing overflows
        if x > SOFTPLUS_THRESHOLD:
            return x
        return (x if x > 0.0 else 0.0) + math.log1p(vexp(-abs(x)))
    if op == ADD_S:
        return x + a
    if op == MUL_S:
        return x * a
    if op == DIV_S:
        return x / a
    if op == RSUB_S:
        return a - x
    if op == RDIV_S:
        return a / x
    if op == POW_S:
        return math.pow(x, a)
    if op == RPOW_S:
        return math.pow(a, x)
    if op == SQUARE:             # exact in float64, so rounded once to float32
        return x * x
    if op == SIGN:
        return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)
    if op == FLOOR:
        return np.floor(x)
    if op == CEIL:
        return np.ceil(x)
    if op == ROUND:
        return np.rint(x)        # halves to even
    if op == TRUNC:
        return np.trunc(x)
    # CLAMP and HARDTANH: NaN passes through, as in PyTorch.
    if x < a:
        return a
    if x > b:
        return b
    return x


@scalar
def unary_grad_scalar(op, x, y, g, a, b):
    """dL/dx for one element, given x, y = op(x) and g = dL/dy."""
    if op == NEG:
        return -g
    if op == EXP:
        return g * y
    if op == LOG:
        return g / x
    if op == SQRT:
        return g / (2.0 * y)
    if op == ABS:
        return g * (1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0))
    if op == RELU:
        return g if x > 0.0 else 0.0
    if op == GELU:
        cdf = 0.5 * math.erfc(-x * _SQRT1_2)
        return g * (cdf + x * _INV_SQRT_2PI * math.exp(-0.5 * x * x))
    if op == SIGMOID:
        return g * y * (1.0 - y)
    if op == TANH:
        return g * (1.0 - y * y)
    if op == SILU:               # d/dx x s(x) = s(x) (1 + x (1 - s(x)))
        s = sigmoid64(x)
        return g * s * (1.0 + x * sigmoid64(-x))
    if op == SOFTPLUS:
        return g if x > SOFTPLUS_THRESHOLD else g * sigmoid64(x)
    if op == ADD_S:
        return g
    if op == MUL_S:
        return g * a
    if op == DIV_S:
        return g / a
    if op == RSUB_S:
        return -g
    if op == RDIV_S:
        return -g * a / (x * x)
    if op == POW_S:
        return 0.0 if a == 0.0 else g * a * math.pow(x, a - 1.0)
    if op == RPOW_S:
        return 0.0 if (a == 0.0 and x >= 0.0) else g * y * math.log(a)
    if op == SQUARE:             # x g, then doubled (exact here; the shader's order)
        return (x * g) * 2.0
    if op == SIGN or op == FLOOR or op == CEIL or op == ROUND or op == TRUNC:
        return 0.0
    if op == HARDTANH:           # no gradient at the bounds; NaN lets g through (PyTorch)
        return 0.0 if (x <= a or x >= b) else g
    # CLAMP
    return g if (x >= a and x <= b) else 0.0


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
    if op == MAXIMUM:
        if x == y:
            return 0.5 * g, 0.5 * g              # ties split the gradient, as in PyTorch
        return (g, 0.0) if x > y else (0.0, g)
    # MINIMUM
    if x == y:
        return 0.5 * g, 0.5 * g
    return (g, 0.0) if x < y else (0.0, g)


# ---------------------------------------------------------------------------------------------
# Kernel factories: one compiled (and cached) kernel per op. Arrays arrive flattened; a
# broadcast operand comes with 4-D element strides (0 along a broadcast axis), read into
# locals before the loops so the compiler can vectorise the inner one.

def _unary_kernel(op):
    def unary_kernel(x, out, a, b):
        for i in range(x.size):
            out[i] = unary_scalar(op, np.float64(x[i]), a, b)
    return fma_kernel(unary_kernel)               # exp, sigmoid, tanh: vmath polynomials


@fma_kernel
def _tanh_f32_kernel(x, out):
    """out = tanh(x) for float32 arrays: vtanh_f32's shortcut, the same bits as the TANH
    unary kernel."""
    for i in range(x.size):
        out[i] = vtanh_f32(np.float64(x[i]))


def _unary_grad_kernel(op):
    def unary_grad_kernel(x, y, g, out, a, b):
        for i in range(g.size):
            out[i] = unary_grad_scalar(op, np.float64(x[i]), np.float64(y[i]),
                                       np.float64(g[i]), a, b)
    return kernel(unary_grad_kernel)


def _binary_kernels(op):
    def binary_flat(x, y, out):
        for i in range(out.size):
            out[i] = binary_scalar(op, np.float64(x[i]), np.float64(y[i]))

    def binary_strided(x, y, out, shape, sx, sy):
        n1, n2, n3 = shape[1], shape[2], shape[3]
        x0, x1, x2, x3 = sx[0], sx[1], sx[2], sx[3]
        y0, y1, y2, y3 = sy[0], sy[1], sy[2], sy[3]
        for row in range(shape[0] * n1 * n2):         # one row = one run along the last axis
            i0, i1, i2 = row // (n1 * n2), (row // n2) % n1, row % n2
            bx = i0 * x0 + i1 * x1 + i2 * x2
            by = i0 * y0 + i1 * y1 + i2 * y2
            o = row * n3
            if x3 == 1 and y3 == 1:       # contiguous runs (e.g. adding a bias row): slices
                xs, ys, os = x[bx:bx + n3], y[by:by + n3], out[o:o + n3]    # vectorise
                for i3 in range(n3):
                    os[i3] = binary_scalar(op, np.float64(xs[i3]), np.float64(ys[i3]))
                continue
            for i3 in range(n3):
                out[o + i3] = binary_scalar(op, np.float64(x[bx + i3 * x3]),
                                            np.float64(y[by + i3 * y3]))
    return kernel(binary_flat), kernel(binary_strided)


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


_UNARY = [_unary_kernel(op.code) for op in UNARY]
_UNARY_GRAD = [_unary_grad_kernel(op.code) for op in UNARY]
_BINARY = [_binary_kernels(op.code) for op in BINARY]
_BINARY_GRAD = [_binary_grad_kernel(op.code) for op in BINARY]


# ---------------------------------------------------------------------------------------------
# Entry points: the CPU twins of shaders/unary.comp and shaders/binary.comp.

def unary(op: str, x: np.ndarray, a: float = 0.0, b: float = 0.0, out=None) -> np.ndarray:
    """y = op(x). The scalar parameters are first rounded to x's dtype, as the GPU gets them."""
    out = np.empty_like(x) if out is None else out
    a, b = float(x.dtype.type(a)), float(x.dtype.type(b))
    if op == "tanh" and x.dtype == out.dtype == np.float32:
        split.run(_tanh_f32_kernel, (x.reshape(-1), out.reshape(-1)))
        return out
    split.run(_UNARY[UNARY.code[op]], (x.reshape(-1), out.reshape(-1)), a, b)
    return out


def unary_backward(op: str, x, y, g, a: float = 0.0, b: float = 0.0,
                   out=None) -> np.ndarray:
    """dL/dx of y = op(x), given dL/dy = g; into ``out`` where given (g itself may be)."""
    out = np.empty_like(g) if out is None else out
    a, b = float(g.dtype.type(a)), float(g.dtype.type(b))
    split.run(_UNARY_GRAD[UNARY.code[op]],
              (x.reshape(-1), y.reshape(-1), g.reshape(-1), out.reshape(-1)), a, b)
    return out


def binary(op: str, x: np.ndarray, y: np.ndarray, out=None) -> np.ndarray:
    """x op y with NumPy broadcasting (up to 4-D)."""
    shape = np.broadcast_shapes(x.shape, y.shape)
    out = np.empty(shape, np.result_type(x, y)) if out is None else out
    flat, strided = _BINARY[BINARY.code[op]]
    if x.shape == y.shape:
        split.run(flat, (x.reshape(-1), y.reshape(-1), out.reshape(-1)))
    elif out.size:
        s4 = pad4(shape)
        strided(x.reshape(-1), y.reshape(-1), out.reshape(-1), s4,
                broadcast_strides(x.shape, s4), broadcast_strides(y.shape, s4))
    return out


def binary_backward(op: str, x: np.ndarray, y: np.ndarray, g: np.ndarray):
    """(dL/dx, dL/dy) of x op y, both in the broadcast shape (the caller sums them down)."""
    gx, gy = np.empty_like(g), np.empty_like(g)
    if g.size:
        s4 = pad4(g.shape)
        _BINARY_GRAD[BINARY.code[op]](
            x.reshape(-1), y.reshape(-1), g.reshape(-1), gx.reshape(-1), gy.reshape(-1), s4,
            broadcast_strides(x.shape, s4), broadcast_strides(y.shape, s4))
    return gx, gy
