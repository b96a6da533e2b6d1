"""CPU backend speed: a training step and each public unary op against PyTorch CPU, big
elementwise ops, reductions and softmax against NumPy, and the time to import dualgrad and
run a first step.

    python3 bench/bench_cpu.py                   # the recorded figures (bench/RESULTS.md)
    python3 bench/bench_cpu.py --mlp 16:8 --elements 4096 --repeats 2 --rounds 1   # smoke

Ratios are ours / peer in time (below 1: we are faster). PyTorch is a benchmark-only peer:
without it the training-step rows print "n/a". It runs on as many threads as we do. In one
process each side's idle threads slow the other (docs/performance.md); `bench/apart.py`
times the two in processes of their own instead.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import dualgrad as dg  # noqa: E402
from dualgrad.api import device  # noqa: E402
from attention_cases import attention_name, ours_attention, torch_attention  # noqa: E402
from cnn_cases import ours_cnn_step, ours_conv, torch_cnn_step, torch_conv  # noqa: E402
from gpt_cases import ours_gpt_step, torch_gpt_step  # noqa: E402
from optim_cases import OPTIM_CASES, ours_optim_step, torch_optim_step  # noqa: E402
import timing  # noqa: E402
from timing import classifier_step, interleaved, report, torch_or_none  # noqa: E402
from unary_cases import UNARY_INPUTS, chosen_ops, unary_cases  # noqa: E402


def _sizes(text: str) -> list:
    """'256:128,1024:256' -> [(256, 128), (1024, 256)] (hidden width, batch)."""
    return [tuple(int(n) for n in pair.split(":")) for pair in text.split(",") if pair]


def _mlp_data(hidden: int, batch: int):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    return x, rng.integers(0, 10, batch)


def mlp_train_step(hidden: int):
    """fn(x, y): one Adam step of a new MLP 784-H-H-10 with softmax cross-entropy, returning
    the loss."""
    nn = dg.nn
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                          nn.ReLU(), nn.Linear(hidden, 10))
    return classifier_step(dg, model, dg.optimizer_adam(model.parameters(), lr=1e-3))


def dualgrad_step(hidden: int, batch: int):
    """That step on fixed data, as a closure of no arguments."""
    x, y = _mlp_data(hidden, batch)
    train_step = mlp_train_step(hidden)
    return lambda: train_step(x, y)


def torch_step(torch, hidden: int, batch: int):
    """The same step in PyTorch (the batch is converted from NumPy each step, as ours is)."""
    x, y = _mlp_data(hidden, batch)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                          nn.ReLU(), nn.Linear(hidden, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    targets = torch.from_numpy(y)

    def step():
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def bench_training(args, torch) -> list:
    rows = []
    for hidden, batch in _sizes(args.mlp):
        ours = dualgrad_step(hidden, batch)
        peer = torch_step(torch, hidden, batch) if torch else None
        for fn in (ours, peer):          # compile, allocate, warm the caches
            for _ in range(3 if fn else 0):
                fn()
        target = "<= 1.0" if hidden * batch <= 256 * 128 else "<= 1.2"
        rows.append((f"Adam step MLP H={hidden} batch={batch}",
                     *interleaved(ours, peer, args.repeats, args.rounds), target))
    return rows


def _softmax_numpy(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def bench_elementwise(args) -> list:
    """Ops over `args.elements` float32 elements through the public API (no tape) against
    the same computation in NumPy."""
    n = args.elements
    cols = 1024 if n >= 1024 * 16 else 16
    rng = np.random.default_rng(1)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    a2 = a.reshape(-1, cols)
    bias = rng.standard_normal(cols).astype(np.float32)
    ta, tb, ta2, tbias = (dg.ag_tensor(v) for v in (a, b, a2, bias))
    cases = [
        ("add", lambda: dg.add(ta, tb), lambda: np.add(a, b)),
        ("mul", lambda: dg.mul(ta, tb), lambda: np.multiply(a, b)),
        ("add bias (broadcast rows)", lambda: dg.add(ta2, tbias), lambda: a2 + bias),
        ("relu", lambda: dg.relu(ta), lambda: np.maximum(a, 0)),
        ("exp", lambda: dg.exp(ta), lambda: np.exp(a)),
        ("tanh", lambda: dg.tanh(ta), lambda: np.tanh(a)),
        ("sum (all)", lambda: dg.sum(ta), lambda: a.sum()),
        ("sum axis 0", lambda: dg.sum(ta2, 0), lambda: a2.sum(axis=0)),
        ("max axis 1", lambda: dg.amax(ta2, 1), lambda: a2.max(axis=1)),
        ("softmax rows", lambda: dg.softmax(ta2), lambda: _softmax_numpy(a2)),
    ]
    rows = []
    for name, ours, peer in cases:
        ours()
        rows.append((f"{name} ({n} el.)", *interleaved(ours, peer, args.repeats, args.rounds),
                     "<= 1.0"))
    return rows


def bench_unary(args, torch) -> list:
    """Each public unary op's forward over ``args.elements`` float32 elements, the kernel
    alone (no tape) against PyTorch CPU's, each writing into an output made once."""
    n = args.elements
    rng = np.random.default_rng(4)
    inputs = {k: draw(rng, n).astype(np.float32) for k, draw in UNARY_INPUTS.items()}
    tensors = {k: torch.from_numpy(v) for k, v in inputs.items()} if torch else {}
    be = device.active()
    out = np.empty(n, np.float32)
    their_out = torch.empty(n) if torch else None      # (both write into storage of their own)
    rows = []
    for op, a, kind, theirs in unary_cases(torch):
        if args.unary and op not in args.unary:
            continue
        x = inputs[kind]
        mine = (lambda o=op, x=x, a=a: be.unary(o, x, a, out=out))
        peer = (lambda f=theirs, t=tensors.get(kind): f(t, out=their_out)) if torch else None
        mine()
        rows.append((f"unary {op}", *interleaved(mine, peer, args.repeats, args.rounds),
                     "<= 1.0"))
    return rows


def bench_low(args, torch) -> list:
    """Ops on bfloat16 tensors through the public API (ours: float32 inside, rounded once;
    the elementwise ones in their own kernels, the rest by conversions) against PyTorch
    CPU's bfloat16 ops; no target (the issue sets none for 16-bit ops on the cpu)."""
    n = args.elements
    rng = np.random.default_rng(11)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    rows = x.reshape(-1, 4096)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    ours = [dg.ag_tensor(v, dtype="bfloat16") for v in (x, y, rows, a, b)]
    theirs = [torch.from_numpy(v).bfloat16() for v in (x, y, rows, a, b)] if torch else []
    cases = [("exp", lambda t: dg.exp(t[0]), lambda t: t[0].exp()),
             ("gelu", lambda t: dg.gelu(t[0]), lambda t: torch.nn.functional.gelu(t[0])),
             ("x + y", lambda t: t[0] + t[1], None), ("x * 2", lambda t: t[0] * 2.0, None),
             ("sum", lambda t: t[0].sum(), None),
             ("softmax rows of 4096", lambda t: dg.softmax(t[2], dim=1),
              lambda t: torch.softmax(t[2], 1)),
             ("matmul 1024^3", lambda t: t[3] @ t[4], None)]
    out = []
    for name, ours_of, theirs_of in cases:
        mine = (lambda f=ours_of: f(ours))
        peer = (lambda f=theirs_of or ours_of: f(theirs))
        mine()
        out.append((f"bfloat16 {name}", *interleaved(mine, peer if torch else None,
                                                     args.repeats, args.rounds), "-"))
    return out


def bench_binary(args, torch) -> list:
    """The binary ops past + - * /, comparisons and int32 reductions over ``args.elements``
    elements, the kernel alone, against PyTorch CPU's."""
    n = args.elements
    rng = np.random.default_rng(10)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    tx, ty = (torch.from_numpy(v) for v in (x, y)) if torch else (None, None)
    be = device.active()
    rows = []
    for op, theirs in (("atan2", "atan2"), ("fmod", "fmod"), ("remainder", "remainder"),
                       ("floor_divide", "floor_divide")):
        mine = (lambda op=op: be.binary(op, x, y))
        peer = (lambda f=getattr(torch, theirs, None): f(tx, ty)) if torch else None
        mine()
        rows.append((f"binary {op}", *interleaved(mine, peer, args.repeats, args.rounds),
                     "<= 1.0"))
    # comparisons (bools of a byte on both sides), a bool to float32, and int32 reductions
    # (ours int32, wrapping; PyTorch's sums int64)
    zero = np.zeros((), np.float32)
    flags = be.logic("gt", x, y)
    ints = rng.integers(-1000, 1000, n).astype(np.int32)
    ti = torch.from_numpy(ints) if torch else None
    lines = n // 4096
    for label, mine, peer in (
            ("x > y", lambda: be.logic("gt", x, y), lambda: tx > ty),
            ("x > 0 (a number)", lambda: be.logic("gt", x, zero), lambda: tx > 0),
            ("bool to float32", lambda: be.cast(flags, np.float32),
             lambda b=(tx > ty) if torch else None: b.float()),
            ("int32 sum, one line", lambda: be.int_reduce("int_sum", ints, 1, n, 1),
             lambda: torch.sum(ti)),
            ("int32 sum, rows of 4096",
             lambda: be.int_reduce("int_sum", ints, lines, 4096, 1),
             lambda: ti.view(lines, 4096).sum(1)),
            ("int32 sum along axis 0 of (rows, 4096)",
             lambda: be.int_reduce("int_sum", ints, 1, lines, 4096),
             lambda: ti.view(lines, 4096).sum(0)),
            ("int32 max, one line", lambda: be.int_reduce("int_max", ints, 1, n, 1),
             lambda: torch.amax(ti))):
        mine()
        rows.append((label, *interleaved(mine, peer if torch else None, args.repeats,
                                         args.rounds), "<= 1.0"))
    return rows


def _along_lines(args, torch, name: str, seed: int, mine_of, peer_of, target: str) -> list:
    """An op along the lines of ``args.elements`` float32 elements read as one line and as
    rows of 4096: ``mine_of(grid)`` ours, ``peer_of(tensor)`` PyTorch CPU's."""
    n = args.elements
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    rows = []
    for label, lines in (("one line", 1), ("rows of 4096", n // 4096)):
        grid = x.reshape(lines, n // lines)
        mine = (lambda grid=grid: mine_of(grid))
        peer = (lambda grid=grid: peer_of(torch.from_numpy(grid))) if torch else None
        mine()
        rows.append((f"{name} of {n}, {label}",
                     *interleaved(mine, peer, args.repeats, args.rounds), target))
    return rows


def bench_scan(args, torch) -> list:
    """cumsum along lines (float32; int32 as one line), against torch.cumsum; cumprod of
    one line, against torch.cumprod."""
    be = device.active()
    rows = _along_lines(args, torch, "cumsum", 6,
                        lambda g: be.cumsum(g, g.shape[0], g.shape[1], 1, False),
                        lambda t: torch.cumsum(t, 1), "<= 1.0")
    n = args.elements
    ints = np.random.default_rng(16).integers(-1000, 1000, n).astype(np.int32)
    mine = (lambda: be.cumsum(ints, 1, n, 1, False))
    peer = (lambda: torch.cumsum(torch.from_numpy(ints), 0, dtype=torch.int32)) \
        if torch else None
    mine()
    rows.append((f"cumsum of {n} int32, one line",
                 *interleaved(mine, peer, args.repeats, args.rounds), "<= 1.0"))
    floats = np.random.default_rng(17).uniform(0.999, 1.001, n).astype(np.float32)
    mine = (lambda: be.cumprod(floats, 1, n, 1, False))
    peer = (lambda: torch.cumprod(torch.from_numpy(floats), 0)) if torch else None
    mine()
    rows.append((f"cumprod of {n}, one line",
                 *interleaved(mine, peer, args.repeats, args.rounds), "<= 1.0"))
    return rows


def bench_reduce(args, torch) -> list:
    """The public reductions through the API over ``args.elements`` float32 elements, as
    one line and as rows of 4096 (the last axis reduced), no tape, against PyTorch CPU's
    (ours accumulate in float64: docs/numerics.md)."""
    n = args.elements
    x = np.random.default_rng(12).standard_normal(n).astype(np.float32)
    rows = x.reshape(-1, 4096)
    cases = (("sum", lambda t, ax: dg.sum(t, axis=ax), lambda t, ax: t.sum(ax)),
             ("mean", lambda t, ax: dg.mean(t, axis=ax), lambda t, ax: t.mean(ax)),
             ("amax", lambda t, ax: dg.max(t, axis=ax), lambda t, ax: t.amax(ax)),
             ("amin", lambda t, ax: dg.min(t, axis=ax), lambda t, ax: t.amin(ax)),
             ("var", lambda t, ax: dg.var(t, axis=ax), lambda t, ax: t.var(ax)),
             ("logsumexp", lambda t, ax: dg.logsumexp(t, axis=ax),
              lambda t, ax: t.logsumexp(ax)),
             ("norm", lambda t, ax: dg.norm(t, axis=ax), lambda t, ax: t.norm(dim=ax)),
             ("argmax", lambda t, ax: dg.argmax(t, dim=ax), lambda t, ax: t.argmax(ax)),
             ("any (x > 1)", lambda t, ax: dg.any(t > 1.0, dim=ax),
              lambda t, ax: (t > 1.0).any(ax)))
    out = []
    for label, grid in (("one line", x), ("rows of 4096", rows)):
        mine_t = dg.ag_tensor(grid)
        peer_t = torch.from_numpy(grid) if torch else None
        axis = grid.ndim - 1
        for name, ours_of, peer_of in cases:
            mine = (lambda f=ours_of: f(mine_t, axis))
            peer = (lambda f=peer_of: f(peer_t, axis)) if torch else None
            mine()
            out.append((f"{name} of {n}, {label}",
                        *interleaved(mine, peer, args.repeats, args.rounds), "<= 1.0"))
    return out


def bench_prod(args, torch) -> list:
    """prod along lines, against torch.prod."""
    be = device.active()
    return _along_lines(args, torch, "prod", 9, lambda g: be.reduce("prod", g, (1,)),
                        lambda t: t.prod(1), "<= 1.0")


def bench_linalg(args, torch) -> list:
    """Ops made of others through the API (einsum and matmul of stacks of attention's
    shape, bilinear resizing), no tape, against PyTorch CPU's (no target: their parts are
    measured in their own rows)."""
    rng = np.random.default_rng(14)
    q, k = (rng.standard_normal((4, 8, 256, 64)).astype(np.float32) for _ in range(2))
    img = rng.standard_normal((16, 32, 64, 64)).astype(np.float32)
    mq, mk, mi = dg.ag_tensor(q), dg.ag_tensor(k), dg.ag_tensor(img)
    tq, tk, ti = (torch.from_numpy(v) for v in (q, k, img)) if torch else (None,) * 3
    import dualgrad.nn.functional as F
    cases = (
        ("einsum bhqd,bhkd->bhqk (4, 8, 256, 64)",
         lambda: dg.einsum("bhqd,bhkd->bhqk", mq, mk),
         lambda: torch.einsum("bhqd,bhkd->bhqk", tq, tk)),
        ("matmul of stacks q @ k^T (4, 8, 256, 64)",
         lambda: mq @ mk.transpose(-2, -1), lambda: tq @ tk.transpose(-2, -1)),
        ("interpolate bilinear x2 (16, 32, 64, 64)",
         lambda: F.interpolate(mi, scale_factor=2, mode="bilinear"),
         lambda: torch.nn.functional.interpolate(ti, scale_factor=2, mode="bilinear")),
        ("interpolate nearest x2 (16, 32, 64, 64)",
         lambda: F.interpolate(mi, scale_factor=2),
         lambda: torch.nn.functional.interpolate(ti, scale_factor=2)))
    rows = []
    for name, mine, peer in cases:
        mine()
        rows.append((name, *interleaved(mine, peer if torch else None, args.repeats,
                                        args.rounds), "-"))
    return rows


def bench_sort(args, torch) -> list:
    """sort along lines, against torch.sort (no target: a sort is not elementwise)."""
    be = device.active()
    return _along_lines(args, torch, "sort", 8, lambda g: be.sort(g, False),
                        lambda t: torch.sort(t, 1), "-")


def bench_optim(args, torch) -> list:
    """One step of each optimizer rule over the MLP 784-H-H-10's parameters, against
    torch.optim's fused (else foreach) step on the CPU."""
    hidden = args.optim_hidden
    rows = []
    for label, kind, hyper in OPTIM_CASES:
        mine = ours_optim_step(dg, kind, hyper, hidden)
        peer = torch_optim_step(torch, kind, hyper, hidden, "cpu") if torch else None
        mine()
        rows.append((f"{label} step, MLP 784-{hidden}-{hidden}-10",
                     *interleaved(mine, peer, args.repeats, args.rounds), "<= 1.0"))
    return rows


def bench_cnn(args, torch) -> list:
    """The CNN's training step and a 3x3 convolution's forward and backward, against
    PyTorch CPU."""
    rows = []
    cases = [(f"CNN Adam step, batch {args.cnn}", ours_cnn_step(dg, args.cnn),
              torch_cnn_step(torch, args.cnn, "cpu") if torch else None)]
    for channels, size in ((32, 28), (64, 14)):
        cases.append((f"conv2d 3x3 fwd+bwd {args.cnn}x{channels}x{size}x{size}",
                      ours_conv(dg, args.cnn, channels, size),
                      torch_conv(torch, args.cnn, channels, size, "cpu") if torch else None))
    for name, mine, peer in cases:
        for fn in (mine, peer):
            for _ in range(2 if fn else 0):
                fn()
        rows.append((name, *interleaved(mine, peer, args.repeats, args.rounds), "<= 1.2"))
    return rows


def bench_attention(args, torch) -> list:
    """Causal attention's forward and backward (heads of 64, 4 x 8 of them) against
    PyTorch CPU's scaled_dot_product_attention."""
    rows = []
    for length in args.attention:
        mine = ours_attention(dg, length)
        peer = torch_attention(torch, length, "cpu") if torch else None
        for fn in (mine, peer):
            if fn:
                fn()
        rows.append((attention_name(length),
                     *interleaved(mine, peer, max(1, args.repeats // 8), args.rounds),
                     "<= 1.2"))
    return rows


def bench_gpt(args, torch) -> list:
    """The GPT's AdamW step against PyTorch CPU."""
    shape = tuple(int(n) for n in args.gpt.split(","))
    mine = ours_gpt_step(dg, *shape)
    peer = torch_gpt_step(torch, *shape, "cpu") if torch else None
    for fn in (mine, peer):
        for _ in range(2 if fn else 0):
            fn()
    repeats = max(1, args.repeats // 4)
    return [("GPT AdamW step B={} T={} E={} L={} H={}".format(*shape),
             *interleaved(mine, peer, repeats, args.rounds), "<= 1.2")]


_FIRST_STEP = """
import time
start = time.perf_counter()
import numpy as np
import dualgrad as dg
dg.ag_device(DEVICE)
model = dg.nn.Sequential(dg.nn.Linear(784, 64), dg.nn.ReLU(), dg.nn.Linear(64, 10))
opt = dg.optimizer_adam(model.parameters(), lr=1e-3)
with dg.with_grad_tape():
    loss = dg.softmax_cross_entropy(model(dg.ag_tensor(np.ones((8, 784)))), np.arange(8))
    loss.backward()
opt.step()
loss.item()
print(time.perf_counter() - start)
"""


def first_step_seconds(cache_dir=None, device: str = "cpu", **extra_env) -> float:
    """Wall time of `import dualgrad` plus a first training step on ``device`` in a new
    process: with Numba's on-disk cache as it is, or with an empty cache in `cache_dir`
    (cold); ``extra_env``: more environment variables."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                              if p]))
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    env.update(extra_env)
    code = _FIRST_STEP.replace("DEVICE", repr(device))
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                          capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def bench_startup(args) -> None:
    first_step_seconds()                 # fills the cache if this checkout never ran
    warm = first_step_seconds()
    print("Start-up (new process: import dualgrad + one training step)")
    print(f"  warm Numba cache {warm:9.3f}s  target < 3 s")
    if args.cold:
        with tempfile.TemporaryDirectory() as empty:
            print(f"  cold (empty cache) {first_step_seconds(empty):7.3f}s  "
                  "(once per install; a notice on stderr says kernels are compiling)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mlp", default="256:128,1024:256",
                        help="hidden:batch pairs for the training step (default %(default)s)")
    parser.add_argument("--elements", type=int, default=1 << 22,
                        help="elements for the elementwise rows (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=20, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="PyTorch's thread count (default: the cores, as ours use)")
    parser.add_argument("--no-peer", action="store_true", help="skip PyTorch even if found")
    parser.add_argument("--optim-hidden", type=int, default=1024,
                        help="H of the optim section's MLP 784-H-H-10 (default %(default)s)")
    parser.add_argument("--cnn", type=int, default=64,
                        help="the batch of the cnn section's step (default %(default)s)")
    parser.add_argument("--gpt", default="32,128,256,4,8",
                        help="batch,context,embedding,layers,heads of the gpt section's step")
    parser.add_argument("--attention", default="1024,2048,4096",
                        help="sequence lengths of the attention section (default "
                             "%(default)s)")
    parser.add_argument("--sections",
                        default="train,cnn,gpt,attention,unary,binary,low,scan,prod,reduce,"
                                "sort,linalg,optim,elementwise,startup",
                        help="which to run (default %(default)s)")
    parser.add_argument("--cold", action="store_true",
                        help="also time a first step with an empty Numba cache (slow)")
    parser.add_argument("--side", choices=("both", "ours", "peer"), default="both",
                        help="time both sides in alternation (default), or one alone "
                             "(bench/apart.py runs each in processes of its own)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH as JSON")
    parser.add_argument("--unary", default="", help="the unary section's ops (e.g. "
                        "'erf,log1p'); every public unary op when empty")
    args = parser.parse_args(argv)
    args.unary = chosen_ops(parser, args.unary)
    args.attention = [int(n) for n in args.attention.split(",") if n]
    timing.SIDE = args.side

    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.2f}")
    torch = None if args.no_peer or args.side == "ours" else torch_or_none()
    if torch is not None:
        torch.set_num_threads(args.threads)
    peer = f"PyTorch {torch.__version__} CPU, {args.threads} threads" if torch else "n/a"
    against_torch = (("train", bench_training, "Training step"),
                     ("unary", bench_unary, f"Unary ops, {args.elements} elements"),
                     ("scan", bench_scan, "Cumulative sums"),
                     ("binary", bench_binary, "Binary ops"),
                     ("low", bench_low, f"bfloat16 ops, {args.elements} elements"),
                     ("prod", bench_prod, "Products"),
                     ("reduce", bench_reduce, f"Reductions, {args.elements} elements"),
                     ("sort", bench_sort, "Sorting"),
                     ("linalg", bench_linalg, "Ops made of others"),
                     ("optim", bench_optim, "Optimizer steps"),
                     ("cnn", bench_cnn, "Convolutions"),
                     ("gpt", bench_gpt, "Transformer"),
                     ("attention", bench_attention, "Attention"))
    for section, bench, title in against_torch:
        if section in args.sections:
            report(bench(args, torch), f"{title}: ours vs {peer}")
    if "elementwise" in args.sections:
        report(bench_elementwise(args), f"Big arrays: ours vs NumPy {np.__version__}")
    if "startup" in args.sections and args.side != "peer":
        bench_startup(args)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(timing.ROWS, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
