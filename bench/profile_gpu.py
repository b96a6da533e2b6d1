"""Where a training step's device time goes: each shader's time a step, timed on the device
(``dualgrad.gpu.timer.KernelTimer``: a timestamp after each dispatch), for the GPT, CNN and
MLP steps the benchmarks time.

    python3 bench/profile_gpu.py --case gpt                # the GPT step, float32
    python3 bench/profile_gpu.py --case gpt --autocast bfloat16
    python3 bench/profile_gpu.py --case cnn --steps 5
    python3 bench/profile_gpu.py --case conv --conv 64:56   # conv2d 3x3 fwd+bwd alone
    python3 bench/profile_gpu.py --case attention --length 4096   # the attention case
    python3 bench/profile_gpu.py --case mlp --mlp 4096:1024  # the MLP 784-H-H-10's Adam step
    python3 bench/profile_gpu.py --case mlp --by-spec     # a row per specialization
    python3 bench/profile_gpu.py --case cumsum --by-spec  # one line's cumsum, each dispatch
    python3 bench/profile_gpu.py --case intmax --by-spec  # one line's int32 max, each dispatch

Each batch of commands is waited for before the next is recorded, so the figures are the
kernels' own time, not the step's (which ``bench_gpu.py`` measures against PyTorch). The
transfers have rows of their own: "(copy)" (the MLP's batch, uploaded each step as the
benchmark's step does), "(fill)" and "(update)".
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import dualgrad as dg  # noqa: E402
from dualgrad.api import device  # noqa: E402
from dualgrad.gpu.timer import KernelTimer  # noqa: E402
from bench_cpu import _mlp_data, mlp_train_step  # noqa: E402
from attention_cases import attention_name, ours_attention  # noqa: E402
from cnn_cases import ours_cnn_step, ours_conv  # noqa: E402
from gpt_cases import gpt_data, gpt_train_step, ours_gpt_model  # noqa: E402
from timing import on_batch  # noqa: E402


def gpt_step(shape: tuple, autocast: str | None):
    batch, context, dim, layers, heads = shape
    model = ours_gpt_model(dg, context, dim, layers, heads)
    step = gpt_train_step(dg, model, dg.optim.AdamW(model.parameters(), lr=1e-3))
    if autocast:
        step = dg.autocast(autocast)(step)
    return on_batch(dg, step, gpt_data(batch, context), False, "GPT")


def mlp_step(hidden: int, batch: int, autocast: str | None):
    """The MLP 784-H-H-10's Adam step on one batch (bench_gpu.py's training section)."""
    x, y = _mlp_data(hidden, batch)
    step = mlp_train_step(hidden)
    if autocast:
        step = dg.autocast(autocast)(step)
    return lambda: step(x, y)


def cumsum_call(elements: int):
    """The cumulative sum of one line of ``elements`` float32 values (bench_gpu.py's scan
    section), its input on the device."""
    x = dg.ag_tensor(np.random.default_rng(0).standard_normal(elements).astype(np.float32))
    return lambda: dg.cumsum(x, 0)


def int_max_call(elements: int):
    """The maximum of one line of ``elements`` int32 values (bench_gpu.py's select section:
    the backend's call), its input on the device."""
    be = device.active()
    values = np.random.default_rng(7).integers(-1000, 1000, elements).astype(np.int32)
    x = be.upload(values, persistent=True)
    return lambda: be.int_reduce("int_max", x, 1, elements, 1)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", choices=("gpt", "cnn", "conv", "attention", "mlp", "cumsum",
                                           "intmax"),
                   default="gpt")
    p.add_argument("--gpt", default="32,128,256,4,8", help="batch,context,dim,layers,heads")
    p.add_argument("--cnn", type=int, default=128, help="the CNN's batch")
    p.add_argument("--conv", default="64:56", help="channels:size of the conv case")
    p.add_argument("--mlp", default="4096:1024", help="hidden:batch of the mlp case")
    p.add_argument("--length", type=int, default=4096, help="the attention case's T")
    p.add_argument("--elements", type=int, default=1 << 24, help="the cumsum and intmax cases' line")
    p.add_argument("--autocast", default=None, help="bfloat16 or float16: the step under it")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--by-spec", action="store_true",
                   help="each specialization of a shader on its own row")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of steps first")
    args = p.parse_args(argv)
    dg.ag_device("gpu")
    dev = device.active().device
    if args.case == "gpt":
        shape = tuple(int(v) for v in args.gpt.split(","))
        step, what = gpt_step(shape, args.autocast), f"GPT step {shape}"
    elif args.case == "conv":
        channels, size = (int(v) for v in args.conv.split(":"))
        step = ours_conv(dg, args.cnn, channels, size)
        what = f"conv2d 3x3 fwd+bwd {args.cnn}x{channels}x{size}x{size}"
    elif args.case == "mlp":
        hidden, batch = (int(v) for v in args.mlp.split(":"))
        step, what = mlp_step(hidden, batch, args.autocast), f"MLP 784-{hidden}-{hidden}-10 " \
            f"Adam step, batch {batch}"
    elif args.case == "attention":
        step, what = ours_attention(dg, args.length), attention_name(args.length)
    elif args.case == "cumsum":
        step, what = cumsum_call(args.elements), f"cumsum of one line of {args.elements}"
    elif args.case == "intmax":
        step, what = int_max_call(args.elements), f"int32 max of one line of {args.elements}"
    else:
        step, what = ours_cnn_step(dg, args.cnn), f"CNN step, batch {args.cnn}"
        if args.autocast:
            step = dg.autocast(args.autocast)(step)
    # Pipelines made, state allocated, and the GPU at its working clocks (a GPU idle a
    # while before runs its first second of work several times slower).
    start, made = time.perf_counter(), 0
    while made < 2 or time.perf_counter() - start < args.warmup:
        step()
        made += 1
    timer = KernelTimer(dev, by_spec=args.by_spec)
    try:
        with timer:
            for _ in range(args.steps):
                step()
        print(f"{what}{' under ' + args.autocast if args.autocast else ''}, "
              f"device time by shader ({dev.ctx.info['name']}, {args.steps} steps):")
        print(timer.table(args.steps))
    finally:
        timer.close()


if __name__ == "__main__":
    main()
