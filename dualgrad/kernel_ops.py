"""Every kernel op, defined once: its name, its family and its code (its position in the
family), and the optimizer rules: their state, scalars and flags.

The cpu kernels select an op by its code (Numba freezes it into a constant) and the shaders by
a specialization constant; both read the codes from here, the shaders through
``shaders/opcodes.glsl``, which ``make shaders`` writes from this module (a test fails when it
is stale). An op's code is its position: a new op goes at the end of its family.

A unary op with a ``doc`` is public as it is: the front end makes ``dg.<name>(x)`` from the
entry (with that docstring; its gradient is the kernel's backward), and ``dg.nn.<layer>``
where ``layer`` is given. Adding such an op touches its entry here, its cpu kernel
(``cpu/unary.py``), its shader code (``shaders/unary.comp``) and its tolerance entries
(``testing/tolerances.py``); the differential check and ``dualgrad verify`` cover it from those.
"""
from __future__ import annotations

from typing import NamedTuple


class KernelOp(NamedTuple):
    name: str
    family: str
    code: int
    doc: str = ""                 # public as dg.<name> with this docstring ("" : internal)
    layer: str = ""               # the dg.nn module applying it ("" : none)


class Family:
    """The ops of one kernel family, in code order."""

    def __init__(self, name: str, ops: list):
        self.name = name
        self.ops = tuple(KernelOp(op[0], name, code, *op[1:]) for code, op in enumerate(ops))
        self._by_name = {op.name: op for op in self.ops}
        self.code = {op.name: op.code for op in self.ops}    # (a dict: kernels look up)
        if len(self._by_name) != len(self.ops):
            raise ValueError(f"kernel_ops: an op of the {name} family is listed twice")

    @property
    def names(self) -> tuple:
        return tuple(op.name for op in self.ops)

    def __getitem__(self, name: str) -> KernelOp:
        return self._by_name[name]

    def __contains__(self, name) -> bool:
        return name in self._by_name

    def __iter__(self):
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def codes(self, *names: str) -> tuple:
        """The codes of the named ops, in the order given."""
        return tuple(self.code[n] for n in names)


UNARY = Family("unary", [
    ("neg", "-x."),
    ("exp", "e**x, elementwise."),
    ("log", "Natural logarithm, elementwise (-inf at 0, NaN below)."),
    ("sqrt", "Square root, elementwise (NaN below 0)."),
    ("abs", "|x|, elementwise; its gradient at 0 is 0."),
    ("relu", "max(x, 0), elementwise.", "ReLU"),
    ("gelu",),             # x Phi(x), the exact (erf) form; public as dg.gelu (approximate=)
    ("sigmoid", "1 / (1 + e**-x), elementwise.", "Sigmoid"),
    ("tanh", "Hyperbolic tangent, elementwise.", "Tanh"),
    # Ops with scalar parameters a, b: the forms binary ops take with a number operand.
    ("add_scalar",), ("mul_scalar",), ("div_scalar",), ("rsub_scalar",), ("rdiv_scalar",),
    ("pow_scalar",), ("rpow_scalar",), ("clamp",),
    ("silu", "x * sigmoid(x), elementwise (PyTorch's SiLU).", "SiLU"),
    ("softplus", "log(1 + e**x), elementwise, and x itself where x > 20 (PyTorch's Softplus "
                 "with beta 1 and threshold 20).", "Softplus"),
    ("square", "x * x, elementwise."),
    ("sign", "-1, 0 or 1 by the sign of x, elementwise (0 for NaN and for -0, as in PyTorch); "
             "its gradient is 0."),
    ("floor", "The largest integer not above x, elementwise; its gradient is 0."),
    ("ceil", "The smallest integer not below x, elementwise; its gradient is 0."),
    ("round", "The nearest integer, halves to the even one (as torch.round), elementwise; "
              "its gradient is 0."),
    ("trunc", "x rounded toward zero to an integer, elementwise; its gradient is 0."),
    # x limited to [a, b]; unlike clamp, no gradient at the bounds (PyTorch's hardtanh).
    ("hardtanh",),
    ("reciprocal", "1 / x, elementwise."),
    ("rsqrt", "1 / sqrt(x), elementwise."),
    ("exp2", "2**x, elementwise."),
    ("expm1", "e**x - 1, elementwise, accurate near 0."),
    ("log2", "Base-2 logarithm, elementwise."),
    ("log10", "Base-10 logarithm, elementwise."),
    ("log1p", "log(1 + x), elementwise, accurate near 0."),
    ("leaky_relu",),       # x, or a x below 0 (a: the negative slope)
    ("elu",),              # x, or a (e**x - 1) below 0 (a: alpha)
    ("selu", "scale * (x, or alpha (e**x - 1) below 0), elementwise, with PyTorch's alpha "
             "and scale (1.6733, 1.0507).", "SELU"),
    ("celu",),             # x, or a (e**(x/a) - 1) below 0 (a: alpha)
    ("hardsigmoid", "min(max(x + 3, 0), 6) / 6, elementwise (PyTorch's Hardsigmoid).",
     "Hardsigmoid"),
    ("hardswish", "x * min(max(x + 3, 0), 6) / 6, elementwise (PyTorch's Hardswish).",
     "Hardswish"),
    ("softsign", "x / (1 + |x|), elementwise.", "Softsign"),
    ("logsigmoid", "log(sigmoid(x)) = -softplus(-x), elementwise, without overflow.",
     "LogSigmoid"),
    ("mish", "x * tanh(softplus(x)), elementwise (PyTorch's Mish).", "Mish"),
    ("gelu_tanh",),        # gelu's tanh approximation; dg.gelu(x, approximate="tanh")
    # maximum(x, a) and minimum(x, a) with a number a: ties split the gradient, as the
    # tensor forms do (clamp's passes it whole).
    ("maximum_scalar",), ("minimum_scalar",),
    ("sin", "Sine, elementwise (accurate for every float32 x: the reduction by pi/2 is exact)."),
    ("cos", "Cosine, elementwise (accurate for every float32 x, as sin)."),
    ("tan", "Tangent, elementwise; its gradient is 1 + tan(x)**2, as PyTorch's."),
    ("asin", "Inverse sine, elementwise (NaN outside [-1, 1])."),
    ("acos", "Inverse cosine, elementwise (NaN outside [-1, 1])."),
    ("atan", "Inverse tangent, elementwise."),
    ("sinh", "Hyperbolic sine, elementwise."),
    ("cosh", "Hyperbolic cosine, elementwise."),
    ("asinh", "Inverse hyperbolic sine, elementwise."),
    ("acosh", "Inverse hyperbolic cosine, elementwise (NaN below 1)."),
    ("atanh", "Inverse hyperbolic tangent, elementwise (+-inf at +-1, NaN outside)."),
    ("erf", "The error function, elementwise."),
    ("erfc", "1 - erf(x), elementwise, accurate where it is tiny (x up to about 10)."),
])
# What a unary op's backward rule reads besides g where it is not x alone: "y" (the
# result), "" (neither) or "xy" (cpu/unary.py's rules and unary.comp's read the same; a
# test holds them to it). The front end keeps only that storage for the backward pass.
UNARY_GRAD_READS = {
    **dict.fromkeys(("exp", "sqrt", "sigmoid", "tanh", "reciprocal", "rsqrt", "exp2", "tan"),
                    "y"),
    **dict.fromkeys(("neg", "add_scalar", "mul_scalar", "div_scalar", "rsub_scalar", "sign",
                     "floor", "ceil", "round", "trunc"), ""),
    "rpow_scalar": "xy",
}


BINARY = Family("binary", [("add",), ("sub",), ("mul",), ("div",), ("pow",), ("maximum",),
                           ("minimum",), ("atan2",), ("fmod",), ("remainder",),
                           ("floor_divide",)])

# Ops with boolean results (a byte each), on float, int32 or bool operands: comparisons
# and logical ops of two (broadcast) operands, then the tests of one.
LOGIC = Family("logic", [("eq",), ("ne",), ("lt",), ("le",), ("gt",), ("ge",),
                         ("logical_and",), ("logical_or",), ("logical_xor",),
                         ("isnan",), ("isinf",), ("isfinite",), ("logical_not",)])
LOGIC_UNARY = ("isnan", "isinf", "isfinite", "logical_not")

# Arithmetic of int32 tensors (two's complement: wrapping as both backends' int32 does);
# floor division and remainder round toward -inf, as Python's and PyTorch's, and give 0
# for a zero divisor. The last two are of one operand.
INTEGER = Family("integer", [("int_add",), ("int_sub",), ("int_mul",), ("int_floor_divide",),
                             ("int_remainder",), ("int_maximum",), ("int_minimum",),
                             ("int_pow",), ("int_neg",), ("int_abs",)])
INTEGER_UNARY = ("int_neg", "int_abs")

# Reductions of int32 tensors: sums wrapping as int32 arithmetic does, maxima and minima.
INT_REDUCE = Family("int_reduce", [("int_sum",), ("int_max",), ("int_min",)])

# min is -max(-x) in one pass: the same bits (NaN wins, -0 against +0 gives -0). sum_squares
# (the sum of x * x, or of (x - center)^2: a 2-norm's), sum_exp (the sum of exp(x - center):
# a log-sum-exp's) and var (the sum of squares about the elements' own mean, divided by a
# divisor: a variance's, in one pass over the input) write nothing but their result, and
# have no backward kernel (their ops' gradients are compositions).
REDUCE = Family("reduce", [("sum",), ("mean",), ("max",), ("prod",), ("min",),
                           ("sum_squares",), ("sum_exp",), ("var",)])
# The reductions with a backward kernel (prod's gradient is a composition: see
# dualgrad/api/reductions.py).
REDUCE_BACKWARD = ("sum", "mean", "max", "min")
# reduce.comp's own extra op, after the family's: counts the elements equal to the maximum
# or minimum (their backward shares the gradient among ties).
COUNT_EQ = len(REDUCE)

# The fused optimizer updates ("rules"), each as PyTorch documents its optimizer. Each rule
# keeps up to three state tensors (OPTIM_STATE: the slots s0, s1, s2 in order; the front end
# names them as PyTorch's state does) and reads the scalars OPTIM_HYPER names, in that order.
OPTIM = Family("optim", [("adam",), ("sgd",), ("rmsprop",), ("adagrad",), ("adamax",),
                         ("nadam",), ("radam",)])

# The front end computes the scalars per step in float64 (dualgrad.api.optimizers); backends
# round them to the tensor dtype. 1 - beta is passed rather than formed from the rounded beta:
# float32(0.999) is 1.3e-8 off, which is 1.3e-5 of 1 - 0.999. l2 is the weight decay added
# to the gradient, decay what decoupled weight decay multiplies the weight by.
_MOMENTS = ("one_minus_beta1", "beta2", "one_minus_beta2", "eps", "l2", "decay")
OPTIM_HYPER = {
    "adam": _MOMENTS + ("step_size", "bc2_sqrt"),
    "sgd": ("lr", "momentum", "dampening", "wd"),
    "rmsprop": ("alpha", "one_minus_alpha", "eps", "l2", "lr", "momentum"),
    "adagrad": ("l2", "clr", "eps"),
    "adamax": ("one_minus_beta1", "beta2", "eps", "l2", "step_size"),
    "nadam": _MOMENTS + ("grad_coef", "m_coef", "bc2_sqrt"),
    "radam": _MOMENTS + ("step_size",),
}
OPTIM_STATE = {
    "adam": ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
    "sgd": ("momentum_buffer",),
    "rmsprop": ("square_avg", "momentum_buffer", "grad_avg"),
    "adagrad": ("sum",),
    "adamax": ("exp_avg", "exp_inf"),
    "nadam": ("exp_avg", "exp_avg_sq"),
    "radam": ("exp_avg", "exp_avg_sq"),
}
OPTIM_SCALARS = max(len(names) for names in OPTIM_HYPER.values())
# The flags word of every rule: a hyper dict holds each flag it sets as True.
#   maximize: ascend (the gradient's sign flipped first); momentum_buffer: SGD's / RMSprop's
#   buffer is kept; nesterov, first (the buffer is new: it becomes the gradient): SGD;
#   amsgrad: Adam keeps the running maximum of v; centered: RMSprop keeps the gradient's mean;
#   rectified: RAdam's variance is tractable this step (the adaptive term applies).
OPTIM_FLAGS = (("maximize", 1), ("momentum_buffer", 2), ("nesterov", 4), ("first", 8),
               ("amsgrad", 16), ("centered", 32), ("rectified", 64))


def optim_flags(hyper: dict) -> int:
    """The flags word of ``hyper`` (OPTIM_FLAGS' names set True in it)."""
    return sum(bit for name, bit in OPTIM_FLAGS if hyper.get(name))


def glsl_header() -> str:
    """``shaders/opcodes.glsl``: the codes above as GLSL constants."""
    lines = ["// Generated from dualgrad/kernel_ops.py by `make shaders`: do not edit.",
             "// Op codes (specialization constants select them) and the optimizer scalars'",
             "// positions."]

    def consts(pairs) -> str:
        text, line = [], "const uint"
        items = [f"{n.upper()} = {v}" for n, v in pairs]
        for k, item in enumerate(items):
            item += ";" if k == len(items) - 1 else ","
            if len(line) + 1 + len(item) > 96:
                text.append(line)
                line = "          "
            line += " " + item
        return "\n".join(text + [line])
    for family in (UNARY, BINARY, REDUCE, LOGIC, INTEGER, INT_REDUCE):
        lines.append(f"// {family.name}")
        lines.append(consts((op.name, op.code) for op in family))
    lines.append("// reduce.comp's own: counts the elements equal to the maximum or minimum")
    lines.append(consts([("count_eq", COUNT_EQ)]))
    lines.append("// optimizer rules, their scalars' positions and the flags")
    lines.append(consts((f"rule_{op.name}", op.code) for op in OPTIM))
    lines.append(consts([("optim_scalars", OPTIM_SCALARS)]))
    for rule, names in OPTIM_HYPER.items():
        lines.append(consts((f"{rule}_{n}", i) for i, n in enumerate(names)))
    lines.append(consts((f"flag_{n}", bit) for n, bit in OPTIM_FLAGS))
    return "\n".join(lines) + "\n"


def _check_names() -> None:
    """The GLSL names of all families are distinct (they share one header)."""
    names = [op.name for f in (UNARY, BINARY, REDUCE) for op in f] + ["count_eq"]
    if len(set(names)) != len(names):
        raise ValueError("kernel_ops: two ops share a name across families")


_check_names()
