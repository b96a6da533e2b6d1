"""The gpu backend's host cost per call: the Python and Vulkan calls that record the hot ops
and an eager Adam training step, timed into a capture that is never submitted (no submit,
no wait, no device time), against the same cases at another git revision of dualgrad loaded
beside this one in the same process.

    python3 bench/bench_host.py                     # this tree alone
    python3 bench/bench_host.py --against 5a013ad   # and ratios against that revision
    python3 bench/bench_host.py --against /tmp/old  # or a copy of it (a directory holding
                                                    # its dualgrad/, where git is not)
    python3 bench/bench_host.py --gpt 32,128,256,4,8 --autocast bfloat16 --only GPT
                                                    # the GPT benchmark's eager step

With ``--live`` it times the eager training step alone, submitted and waited for: each
round queues its steps and waits for the device, so the figure is the step's whole time as
a training loop sees it (on a GPU whose kernels keep up with the host, its host time), not
only the recording's. With ``--phases`` it times the eager step's phases instead (entering
the tape, the batch's upload, forward, loss, backward, the optimizer's step, zero_grad),
recorded only, or with ``--live`` run on the device (the wait then a phase of its own).

Host speed drifts within a process and differs between processes (by up to 2x on the
machines measured), so the two revisions alternate round by round and each figure is a
median over rounds: the ratio is the figure to read. The revision's package is extracted
with ``git archive`` and imported as ``dualgrad_ref`` (the package imports itself
relatively). Any Vulkan device will do, lavapipe included: without ``--live`` nothing
runs on it.
"""
from __future__ import annotations

import argparse
import importlib
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Cases of many dispatches, run a tenth as often.
HEAVY = ("Adam step() of 100 parameters of 512", "eager Adam step", "eager GPT")
PHASES = ("tape", "batch", "forward", "loss", "backward", "step", "zero_grad", "wait")
ADAM = ("beta1", "beta2", "one_minus_beta1", "one_minus_beta2", "eps", "l2", "decay",
        "step_size", "bc2_sqrt")


def extract(revision: str, into: str) -> None:
    """dualgrad as it is at ``revision`` (or in the directory ``revision``), as the package
    dualgrad_ref under ``into``."""
    source = pathlib.Path(revision) / "dualgrad"
    if source.is_dir():
        shutil.copytree(source, pathlib.Path(into) / "dualgrad",
                        ignore=shutil.ignore_patterns("__pycache__"))
    else:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "dualgrad"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    (pathlib.Path(into) / "dualgrad").rename(pathlib.Path(into) / "dualgrad_ref")


def cases(package: str, hidden: int, batch: int, live_steps: bool = False,
          gpt: tuple = (), autocast: str | None = None) -> tuple:
    """({name: call}, round(call, calls) -> us a call) for the gpu backend of ``package``:
    recorded only, or with ``live_steps`` submitted and waited for; with ``gpt``
    (batch, context, embedding, layers, heads), the GPT benchmark's eager AdamW step too,
    under ``autocast`` where given."""
    dg = importlib.import_module(package)
    device = importlib.import_module(package + ".api.device")
    dg.ag_device("gpu")
    be = device.active()
    # Revisions before the Device noun (0bb87d6 and earlier) kept it all on the backend.
    dev = getattr(be, "device", be)
    rec = dev.rec
    if hasattr(be, "begin_pass"):
        product_into = importlib.import_module(package + ".gpu.kernels.matmul").product_into

        def product():
            product_into(dev, h, w, hout, False, True, (256, 1024, 1024, 1))

        def reset():
            be.begin_pass(0)
    else:
        def product():
            be._matmul_into(h, w, hout, False, True, 256, 1024, 1024, 1)
        reset = be.reset_pass

    def put(shape):
        return be.upload(np.ones(shape, np.float32), persistent=True)
    x, y, out = put(1 << 20), put(1 << 20), be.empty((1 << 20,), persistent=True)
    h, w, g, hout = put((256, 1024)), put((1024, 1024)), put((256, 1024)), put((256, 1024))
    hyper = dict.fromkeys(ADAM, 0.5)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((batch, 784)).astype(np.float32), rng.integers(0, 10, batch)
    nn = dg.nn
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                          nn.ReLU(), nn.Linear(hidden, 10))
    opt = dg.optimizer_adam(model.parameters(), lr=1e-3)
    many = [dg.ag_param(np.ones(512, np.float32)) for _ in range(100)]
    for p in many:
        p.grad = np.ones(512, np.float32)
    many_opt = dg.optimizer_adam(many, lr=1e-3)

    def step():
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(data[0])), data[1])
            loss.backward()
        opt.step()
        opt.zero_grad()

    def phased_step(spent: list) -> None:
        """The same step, each phase's seconds added to its entry of ``spent``."""
        clock = time.perf_counter
        t0 = clock()
        with dg.with_grad_tape():
            t1 = clock()
            x = dg.ag_tensor(data[0])
            t2 = clock()
            logits = model(x)
            t3 = clock()
            loss = dg.softmax_cross_entropy(logits, data[1])
            t4 = clock()
            loss.backward()
            t5 = clock()
        opt.step()
        t6 = clock()
        opt.zero_grad()
        t7 = clock()
        for i, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5),
                                    (t5, t6), (t6, t7))):
            spent[i] += b - a
    xp = dg.ag_param(np.ones((256, 1024), np.float32))
    calls = {
        "x + x of 256 x 1024, the public op": lambda: xp + xp,
        "sum of 1M": lambda: be.reduce("sum", x, (0,)),
        "add of 1M, into one output": lambda: be.binary("add", x, y, out=out),
        "relu of 1M, into one output": lambda: be.unary("relu", x, out=out),
        "relu of 256 x 1024, a new output": lambda: be.unary("relu", h),
        "relu backward of 256 x 1024": lambda: be.unary_backward("relu", h, h, g),
        "matmul 256 x 1024 x 1024, into one output": product,
        "adam_step of 256 x 1024": (  # (a revision before optim_step had adam_step)
            (lambda: be.optim_step("adam", h, g, (hout, out), hyper))
            if hasattr(be, "optim_step") else (lambda: be.adam_step(h, g, hout, out, hyper))),
        HEAVY[0]: many_opt.step,
        f"{HEAVY[1]}, MLP 784-{hidden}-{hidden}-10, batch {batch}": step,
    }
    if gpt:
        from gpt_cases import gpt_data, gpt_train_step, ours_gpt_model
        gpt_model = ours_gpt_model(dg, *gpt[1:])
        gpt_step = gpt_train_step(dg, gpt_model, dg.optim.AdamW(gpt_model.parameters(),
                                                                lr=1e-3))
        if autocast:
            gpt_step = dg.autocast(autocast)(gpt_step)
        ids, targets = gpt_data(*gpt[:2])
        calls[f"{HEAVY[2]} AdamW step {gpt}" + (f" {autocast} autocast" if autocast else "")
              ] = lambda: gpt_step(ids, targets)
    for call in calls.values():         # pipelines made, pools grown, optimizer state made
        call()
        call()
    rec.flush(wait=True)

    def timed(call, n: int) -> float:
        with be.ctx.lock:
            rec.begin_capture()
        start = time.perf_counter()
        for _ in range(n):
            call()
        seconds = (time.perf_counter() - start) / n
        with be.ctx.lock:
            recorded = rec.end_capture()
        rec.free_captured(recorded)
        reset()
        return seconds * 1e6

    def live(call, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            call()
        rec.flush(wait=True)
        return (time.perf_counter() - start) / n * 1e6

    def phases(n: int) -> list:
        """us a step in each of PHASES over ``n`` steps (the wait 0 unless live)."""
        spent = [0.0] * len(PHASES)
        if live_steps:
            for _ in range(n):
                phased_step(spent)
            start = time.perf_counter()
            rec.flush(wait=True)
            spent[-1] = time.perf_counter() - start
        else:
            timed(lambda: phased_step(spent), n)
        return [t / n * 1e6 for t in spent]
    return calls, (live if live_steps else timed), phases


def report_phases(runs: dict, packages: list, args) -> int:
    """Print the median us a step of each phase of the eager training step, per package
    (the packages alternating round by round), and the sum of those medians."""
    steps = max(5, args.calls // 10)
    times = {pkg: [] for pkg in packages}
    for r in range(args.rounds):
        for pkg in (packages if r % 2 == 0 else packages[::-1]):
            times[pkg].append(runs[pkg][2](steps))
    how = "run on the device" if args.live else "recorded only"
    print(f"the eager training step's phases, us a step, {how} (medians of {args.rounds} "
          f"rounds of {steps} steps): " + ", ".join(packages))
    shown = PHASES if args.live else PHASES[:-1]
    medians = [[statistics.median(t[i] for t in times[pkg]) for pkg in packages]
               for i in range(len(shown))]
    for name, row in zip(shown + ("total",), medians + [[sum(c) for c in zip(*medians)]]):
        ratio = f" {row[0] / row[1]:6.2f}" if len(row) > 1 and row[1] else ""
        print(f"  {name:<10}" + "".join(f" {v:9.1f}" for v in row) + ratio)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--against", help="a git revision to compare with, or a directory that "
                   "holds its dualgrad package (default: none)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=400, help="calls of an op per round (a "
                   "tenth as many training steps, at least 5)")
    p.add_argument("--train", default="256:128", help="H:batch of the training step")
    p.add_argument("--live", action="store_true", help="the training step alone, run on the "
                   "device: each round's steps queued, then a wait")
    p.add_argument("--ref-first", action="store_true", help="open the revision's device "
                   "before this tree's (by default this tree's is opened first)")
    p.add_argument("--phases", action="store_true", help="the training step's phases, each "
                   "timed (recorded only, or with --live run on the device)")
    p.add_argument("--gpt", default="", help="batch,context,embedding,layers,heads: the GPT "
                   "benchmark's eager step too (e.g. 32,128,256,4,8)")
    p.add_argument("--autocast", choices=("bfloat16", "float16"), help="the GPT step under "
                   "this autocast")
    p.add_argument("--only", default="", help="the cases whose name contains this text")
    args = p.parse_args(argv)
    gpt = tuple(int(v) for v in args.gpt.split(",")) if args.gpt else ()
    hidden, batch = (int(v) for v in args.train.split(":"))
    with tempfile.TemporaryDirectory() as tmp:
        packages = ["dualgrad"]
        if args.against:
            extract(args.against, tmp)
            sys.path.insert(0, tmp)
            packages.append("dualgrad_ref")
        # The device made second may be the faster one (a software device shares the host):
        # --ref-first swaps which is made first, so processes can be run both ways.
        made = packages[::-1] if args.ref_first else packages
        runs = {pkg: cases(pkg, hidden, batch, args.live, gpt, args.autocast) for pkg in made}
        if args.phases:
            return report_phases(runs, packages, args)
        names = [name for name in runs["dualgrad"][0] if args.only in name]
        if args.live:
            names = [name for name in names if name.startswith(HEAVY[1:])]
        times = {(pkg, name): [] for pkg in packages for name in names}
        for r in range(args.rounds):
            for pkg in (packages if r % 2 == 0 else packages[::-1]):
                calls, timed, _ = runs[pkg]
                for name in names:
                    n = max(5, args.calls // 10) if name.startswith(HEAVY) else args.calls
                    times[pkg, name].append(timed(calls[name], n))
    ref = f"at {args.against}" if args.against else "n/a"
    how = "run on the device" if args.live else "host time a call, recorded only"
    print(f"gpu backend {how} (medians of {args.rounds} rounds): this tree, {ref}, ratio")
    for name in names:
        ours = statistics.median(times["dualgrad", name])
        if args.against:
            theirs = statistics.median(times["dualgrad_ref", name])
            print(f"  {name:<52} {ours:9.1f}us {theirs:9.1f}us {ours / theirs:6.2f}")
        else:
            print(f"  {name:<52} {ours:9.1f}us       n/a    n/a")
    return 0


if __name__ == "__main__":
    sys.exit(main())
