"""The public unary ops the benchmarks time, each with its inputs and PyTorch's call (shared by
bench_gpu.py and bench_cpu.py)."""
from __future__ import annotations


def unary_cases(torch) -> list:
    """(our op, its scalar parameter, its inputs (a key of ``UNARY_INPUTS``), PyTorch's call
    or None) for the unary ops the front end makes public."""
    F = torch.nn.functional if torch else None
    cases = [("exp", 0.0, "normal", "exp"), ("exp2", 0.0, "normal", "exp2"),
             ("expm1", 0.0, "normal", "expm1"), ("log", 0.0, "positive", "log"),
             ("log2", 0.0, "positive", "log2"), ("log10", 0.0, "positive", "log10"),
             ("log1p", 0.0, "positive", "log1p"), ("sqrt", 0.0, "positive", "sqrt"),
             ("rsqrt", 0.0, "positive", "rsqrt"), ("reciprocal", 0.0, "positive", "reciprocal"),
             ("sigmoid", 0.0, "normal", "sigmoid"), ("tanh", 0.0, "normal", "tanh"),
             ("sin", 0.0, "wide", "sin"), ("cos", 0.0, "wide", "cos"),
             ("tan", 0.0, "wide", "tan"), ("asin", 0.0, "unit", "asin"),
             ("acos", 0.0, "unit", "acos"), ("atan", 0.0, "wide", "atan"),
             ("sinh", 0.0, "normal", "sinh"), ("cosh", 0.0, "normal", "cosh"),
             ("asinh", 0.0, "wide", "asinh"), ("acosh", 0.0, "above_one", "acosh"),
             ("atanh", 0.0, "unit", "atanh"), ("erf", 0.0, "normal", "erf"),
             ("erfc", 0.0, "normal", "erfc")]
    rows = [(op, a, inputs, (lambda x, n=name: getattr(torch, n)(x)) if torch else None)
            for op, a, inputs, name in cases]
    activations = [("gelu", 0.0, lambda x: F.gelu(x)),
                   ("gelu_tanh", 0.0, lambda x: F.gelu(x, approximate="tanh")),
                   ("silu", 0.0, lambda x: F.silu(x)), ("softplus", 0.0, lambda x: F.softplus(x)),
                   ("mish", 0.0, lambda x: F.mish(x)), ("elu", 1.0, lambda x: F.elu(x)),
                   ("selu", 0.0, lambda x: F.selu(x)), ("celu", 1.0, lambda x: F.celu(x)),
                   ("leaky_relu", 0.01, lambda x: F.leaky_relu(x)),
                   ("hardsigmoid", 0.0, lambda x: F.hardsigmoid(x)),
                   ("hardswish", 0.0, lambda x: F.hardswish(x)),
                   ("softsign", 0.0, lambda x: F.softsign(x)),
                   ("logsigmoid", 0.0, lambda x: F.logsigmoid(x))]
    return rows + [(op, a, "normal", fn if torch else None) for op, a, fn in activations]


# Each op's inputs: where it is defined, and for sin, cos and tan past pi/4, where they
# reduce their argument (x 10: beyond a few periods).
UNARY_INPUTS = {"normal": lambda rng, n: rng.standard_normal(n),
                "positive": lambda rng, n: rng.uniform(0.1, 4.0, n),
                "wide": lambda rng, n: 10.0 * rng.standard_normal(n),
                "unit": lambda rng, n: rng.uniform(-1.0, 1.0, n),
                "above_one": lambda rng, n: rng.uniform(1.0, 5.0, n)}
