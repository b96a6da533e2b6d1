"""The public unary ops the benchmarks time, each with its inputs and PyTorch's call (shared by
bench_gpu.py and bench_cpu.py)."""
from __future__ import annotations


def chosen_ops(parser, text: str) -> list:
    """``--unary``'s ops: the names in ``text`` (comma-separated; none: every op), each one
    of the cases' (else the parser's error)."""
    ops = [op for op in text.split(",") if op]
    unknown = set(ops) - {op for op, *_ in unary_cases(None)}
    if unknown:
        parser.error(f"--unary: {', '.join(sorted(unknown))} is no public unary op of the "
                     "section")
    return ops


def unary_cases(torch) -> list:
    """(our op, its scalar parameter, its inputs (a key of ``UNARY_INPUTS``), PyTorch's call
    or None) for the unary ops the front end makes public. PyTorch's call is fn(x, out=None):
    given ``out``, it writes there (through the op's ``out=`` overload), as our kernels do
    when timed alone; without, it allocates its result. (Over 16M elements an allocated
    result's first writes fault its pages in, which took PyTorch's exp 12 -> 38 ms on
    the 2-core machine: a timing of ours into ``out`` against that is not a fair one.)"""
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
    rows = [(op, a, inputs, _call(getattr(torch, name)) if torch else None)
            for op, a, inputs, name in cases]
    if not torch:
        return rows + [(op, a, "normal", None) for op, a in _ACTIVATIONS]
    F, aten = torch.nn.functional, torch.ops.aten
    selu = (1.6732632423543772, 1.0507009873554805)      # (alpha, scale: F.selu's)
    # each activation as F's call, and the out= overload of the kernel it runs
    theirs = {"gelu": (F.gelu, lambda x, out: aten.gelu.out(x, out=out)),
              "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                            lambda x, out: aten.gelu.out(x, approximate="tanh", out=out)),
              "silu": (F.silu, lambda x, out: aten.silu.out(x, out=out)),
              "softplus": (F.softplus, lambda x, out: aten.softplus.out(x, 1, 20, out=out)),
              "mish": (F.mish, lambda x, out: aten.mish.out(x, out=out)),
              "elu": (F.elu, lambda x, out: aten.elu.out(x, 1.0, 1.0, 1.0, out=out)),
              "selu": (F.selu, lambda x, out: aten.elu.out(x, *selu, 1.0, out=out)),
              "celu": (F.celu, lambda x, out: aten.elu.out(x, 1.0, 1.0, 1.0, out=out)),
              "leaky_relu": (F.leaky_relu,
                             lambda x, out: aten.leaky_relu.out(x, 0.01, out=out)),
              "hardsigmoid": (F.hardsigmoid, lambda x, out: aten.hardsigmoid.out(x, out=out)),
              "hardswish": (F.hardswish, lambda x, out: aten.hardswish.out(x, out=out)),
              # (F.softsign is x / (1 + |x|), ops of their own: made in out, no temporary)
              "softsign": (F.softsign, lambda x, out: torch.div(
                  x, torch.abs(x, out=out).add_(1.0), out=out)),
              "logsigmoid": (F.logsigmoid, lambda x, out: aten.log_sigmoid.out(x, out=out))}
    return rows + [(op, a, "normal", _call(*theirs[op])) for op, a in _ACTIVATIONS]


_ACTIVATIONS = [("gelu", 0.0), ("gelu_tanh", 0.0), ("silu", 0.0), ("softplus", 0.0),
                ("mish", 0.0), ("elu", 1.0), ("selu", 0.0), ("celu", 1.0),
                ("leaky_relu", 0.01), ("hardsigmoid", 0.0), ("hardswish", 0.0),
                ("softsign", 0.0), ("logsigmoid", 0.0)]


def _call(fn, into=None):
    """PyTorch's call fn(x, out=None): ``into(x, out)`` (by default fn(x, out=out)) with an
    ``out``, fn(x) without."""
    def call(x, out=None):
        if out is None:
            return fn(x)
        return into(x, out) if into else fn(x, out=out)
    return call


# Each op's inputs: where it is defined, and for sin, cos and tan past pi/4, where they
# reduce their argument (x 10: beyond a few periods).
UNARY_INPUTS = {"normal": lambda rng, n: rng.standard_normal(n),
                "positive": lambda rng, n: rng.uniform(0.1, 4.0, n),
                "wide": lambda rng, n: 10.0 * rng.standard_normal(n),
                "unit": lambda rng, n: rng.uniform(-1.0, 1.0, n),
                "above_one": lambda rng, n: rng.uniform(1.0, 5.0, n)}
