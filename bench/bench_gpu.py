"""GPU backend speed against PyTorch CUDA: f32 matmul (big squares and the products of an
MLP's forward and backward), elementwise ops and reductions over 16M elements, and an Adam
training step, run eagerly and replayed (``dg.capture_step``).

    python3 bench/bench_gpu.py                    # the recorded figures (bench/RESULTS.md)
    python3 bench/bench_gpu.py --tiny             # small sizes, e.g. on lavapipe (smoke)
    python3 bench/bench_gpu.py --sweep            # every matmul tile and split K, each
                                                  # against PyTorch in the same rounds
    python3 bench/bench_gpu.py --sweep --recorded # the same, kernels only (recorded chains
                                                  # replayed, PyTorch's as CUDA graphs)
    python3 bench/bench_gpu.py --sweep --tiles 'deep,64x64x32/8x4'
                                                  # only these tiles (labels or shapes)
    python3 bench/bench_gpu.py --overlap          # matmul as independent calls
    python3 bench/bench_gpu.py --only 'g3^T h'    # the matmul cases so named (any mode)
    python3 bench/bench_gpu.py --sweep --low bfloat16 --squares 8192 --mlp-shapes ''
                                                  # autocast's bfloat16 products, every tile
    python3 bench/bench_gpu.py --sweep --recorded --gpt-products --squares '' --mlp-shapes ''
                                                  # the GPT step's products, every tile
    python3 bench/bench_gpu.py --sections unary --unary erf,asinh
                                                  # these unary ops only
    python3 bench/bench_gpu.py --sections floor   # tiny chained kernels: per-dispatch cost
    python3 bench/bench_gpu.py --sections kernels # the matmul cases recorded and replayed
                                                  # (a CUDA graph for PyTorch): no host time;
                                                  # and the floor's, the device's cost of a
                                                  # dependent dispatch

Ratios are ours / peer in time (below 1: we are faster). Both sides are timed the same
way: a number of calls queued (for a product, milliseconds of them: see ``_calls``), then
a wait for the device (our queue's fence, or torch.cuda.synchronize), divided by the number
of calls; a matmul row also shows one call and its wait, the latency a lone product adds.
PyTorch runs with TF32 off, so both compute full float32 products. Without PyTorch or CUDA
the peer prints "n/a".
"""
from __future__ import annotations

import argparse
import gc
import pathlib
import re
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import dualgrad as dg  # noqa: E402
from bench_cpu import (_mlp_data, _sizes, dualgrad_step, first_step_seconds,  # noqa: E402
                       mlp_train_step)
from dualgrad.api import device  # noqa: E402
from dualgrad.backend import TAPE  # noqa: E402
from dualgrad.gpu import plans  # noqa: E402
from dualgrad.gpu.kernels.matmul import product_into  # noqa: E402
from attention_cases import attention_name, ours_attention, torch_attention  # noqa: E402
from cnn_cases import ours_cnn_step, ours_conv, torch_cnn_step, torch_conv  # noqa: E402
from gpt_cases import ours_gpt_step, torch_gpt_step  # noqa: E402
from optim_cases import OPTIM_CASES, ours_optim_step, torch_optim_step  # noqa: E402
from timing import interleaved, on_batch, report, torch_or_none  # noqa: E402
from unary_cases import UNARY_INPUTS, chosen_ops, unary_cases  # noqa: E402


def cuda_torch():
    """PyTorch with a CUDA device and TF32 off, or None."""
    torch = torch_or_none()
    if torch is None or not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


class Ours:
    """The gpu backend, with a wait that also frees the pass pool the calls filled."""

    def __init__(self):
        self.backend = device.active()

    def wait(self) -> None:
        with self.backend.ctx.lock:
            self.backend.device.rec.flush(wait=True)

    def sync(self) -> None:
        self.wait()
        self.backend.begin_pass(TAPE)

    def put(self, array):
        return self.backend.upload(np.ascontiguousarray(array), persistent=True)


def timed(args, ours, peer, sync_ours, sync_peer, calls: int):
    """(ours, peer) seconds per call, ``calls`` calls queued per wait."""
    def many(fn):
        def run():
            for _ in range(calls):
                fn()
        return run
    for fn, sync in ((ours, sync_ours), (peer, sync_peer)):   # compile, allocate, warm up
        if fn is not None:
            fn()
            sync()
    t_ours, t_peer = interleaved(many(ours), many(peer) if peer else None, args.repeats,
                                 args.rounds, sync_ours, sync_peer)
    return t_ours / calls, (t_peer / calls if t_peer else None)


def host_share(fn, ours, calls: int, repeats: int = 5) -> tuple:
    """Our seconds per call spent recording (host: Python, Vulkan calls, and submits made
    along the way) and then waiting for the device, as medians over ``repeats`` batches,
    and the submits per call."""
    host, wait = [], []
    counters = ours.backend.device.rec.counters
    submits = counters.submits
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        mid = time.perf_counter()
        ours.sync()
        host.append(mid - start)
        wait.append(time.perf_counter() - mid)
    submits = (counters.submits - submits) / (calls * repeats)
    return statistics.median(host) / calls, statistics.median(wait) / calls, submits


# -- matmul ---------------------------------------------------------------------------------
def matmul_cases(args) -> list:
    """(name, m, n, k, trans_a, trans_b): squares, then each product of an MLP 784-H-H-10
    step as Linear computes it (forward x W^T, backward g W and g^T x); with
    ``args.gpt_products``, each distinct product of the GPT benchmark's layers (its tokens
    by the attention's projections and the feed-forward's, and their gradients)."""
    cases = [(f"{s}^3", s, s, s, False, False) for s in args.squares]
    if args.gpt_products:
        batch, context, dim = args.gpt[:3]
        tokens = batch * context
        for name, out in (("qkv", 3 * dim), ("proj", dim), ("ff up", 4 * dim)):
            cases += [(f"GPT {name} x W^T", tokens, out, dim, False, True),
                      (f"GPT {name} g W", tokens, dim, out, False, False),
                      (f"GPT {name} g^T x", out, dim, tokens, True, False)]
        cases += [("GPT ff down x W^T", tokens, dim, 4 * dim, False, True),
                  ("GPT ff down g W", tokens, 4 * dim, dim, False, False),
                  ("GPT ff down g^T x", dim, 4 * dim, tokens, True, False)]
    for hidden, batch in args.mlp_shapes:
        tag = f"H{hidden}B{batch}"
        for name, m, n, k, ta, tb in [
                ("fwd1 x W1^T", batch, hidden, 784, False, True),
                ("fwd2 h W2^T", batch, hidden, hidden, False, True),
                ("fwd3 h W3^T", batch, 10, hidden, False, True),
                ("bwd g3 W3", batch, hidden, 10, False, False),
                ("bwd g3^T h", 10, hidden, batch, True, False),
                ("bwd g2 W2", batch, hidden, hidden, False, False),
                ("bwd g2^T h", hidden, hidden, batch, True, False),
                ("bwd g1^T x", hidden, 784, batch, True, False)]:
            cases.append((f"{tag} {name}", m, n, k, ta, tb))
    return cases


def _operands(m, n, k, ta, tb):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


MAX_CALLS = 200                   # calls per wait at most (see _calls)


def _calls(flops: float) -> int:
    """Calls per wait: products of about 2e11 flops in all (milliseconds of work), at most
    MAX_CALLS, so that a wait's fixed cost is a small part of the time on both sides. That
    cost is the device's idle start (our first submit follows a few recorded calls) and the
    wait's end: H200, beyond the products' own time, about 0.17 ms a wait for us and 0.03
    ms for PyTorch, so 50 calls of a 17 us product (the cap until 2026-12-02) made it 16%
    of our figure and 3% of PyTorch's, and 200 calls make it 5% and 1%. The matmul rows
    show the latency itself: a call and its wait."""
    return int(min(MAX_CALLS, max(1, 2e11 // max(flops, 1.0))))


def our_product(args, ours, ha, hb, m, n, k, ta, tb):
    """A call of our matmul. Every call writes one output, so each waits for the one
    before, as the kernels of PyTorch's stream (and the products of a training step) do;
    with ``args.overlap``, independent calls, which the device may run at once."""
    be = ours.backend
    if args.overlap:
        # Outputs kept: a dropped one's range would be the next call's, which must then
        # wait for the call before (a call queues at most 200 of them before a wait).
        kept = []

        def independent():
            if len(kept) >= 256:
                kept.clear()
            kept.append(be.matmul(ha, hb, ta, tb))
        return independent
    out = be.empty((m, n), persistent=True)
    low = np.dtype(args.low) if args.low else None
    return lambda: product_into(be.device, ha, hb, out, ta, tb, (m, n, k, 1), low=low)


def peer_product(torch, a, b, ta, tb, low=None) -> tuple:
    """(call, sync) of PyTorch's product of the same operands (stored in the dtype named
    ``low``, as given), or (None, None)."""
    if not torch:
        return None, None
    da, db = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    if low:
        da, db = da.to(getattr(torch, low)), db.to(getattr(torch, low))
    oa, ob = (da.t() if ta else da), (db.t() if tb else db)
    return (lambda: torch.matmul(oa, ob)), torch.cuda.synchronize


def matmul_runs(args, ours, torch):
    """Each matmul case ready to time: (name, (m, n, k), flops, our call, PyTorch's call
    and sync, or None and None)."""
    for name, m, n, k, ta, tb in matmul_cases(args):
        if args.only and args.only not in name:
            continue
        a, b = _operands(m, n, k, ta, tb)
        ha, hb = ours.put(a), ours.put(b)
        mine = our_product(args, ours, ha, hb, m, n, k, ta, tb)
        yield (name, (m, n, k), 2.0 * m * n * k, mine,
               *peer_product(torch, a, b, ta, tb, args.low))


def tflops(flops: float, t_ours: float, t_peer) -> str:
    """Ours/peer TFLOP/s (ours alone without a peer)."""
    return f"{flops / t_ours / 1e12:.1f}" + (f"/{flops / t_peer / 1e12:.1f}" if t_peer else "")


def microseconds(t_ours: float, t_peer) -> str:
    """Ours/peer in us (ours alone without a peer)."""
    return f"{t_ours * 1e6:.0f}" + (f"/{t_peer * 1e6:.0f}" if t_peer else "") + "us"


def bench_matmul(args, ours, torch) -> list:
    rows = []
    for name, _, flops, mine, peer, sync_peer in matmul_runs(args, ours, torch):
        t_ours, t_peer = timed(args, mine, peer, ours.sync, sync_peer, _calls(flops))
        host, _, _ = host_share(mine, ours, _calls(flops), 3)
        one = timed(args, mine, peer, ours.sync, sync_peer, 1)    # latency, not throughput
        rows.append((f"matmul {name} [{tflops(flops, t_ours, t_peer)} TF/s; host "
                     f"{host * 1e6:.0f}us; a call and its wait {microseconds(*one)}]",
                     t_ours, t_peer, "<= 1.1"))
    return rows


def recorded(ours, call, calls: int):
    """``calls`` calls of ``call`` recorded once into a reusable command buffer: (replay,
    release). What they allocate stays theirs until release (wait with ``ours.wait``,
    which keeps the pass pool, until then)."""
    be, rec = ours.backend, ours.backend.device.rec
    with be.ctx.lock:
        rec.begin_capture()
    try:
        for _ in range(calls):
            call()
    finally:
        with be.ctx.lock:
            cmd = rec.end_capture()

    def replay():
        with be.ctx.lock:
            rec.submit(cmd)
    return replay, lambda: rec.free_captured(cmd)


def peer_graph(torch, call, calls: int):
    """``calls`` calls of ``call`` captured once into a CUDA graph: its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):             # warm up off the capture (cuBLAS workspaces)
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            call()
    return graph.replay


REPLAYS = 5                       # replays per wait: a wait costs ours 20-130 us, up to
                                  # 3 us a product if each replay were waited for


def case_timer(args, ours, torch, peer, sync_peer, calls: int, replayed: bool):
    """measure(mine) -> (ours, peer) seconds a product of one matmul case: ``calls`` calls
    queued one by one, as the matmul section times them, or with ``replayed`` a chain of
    ``calls`` recorded once and replayed (ours: one reusable command buffer; PyTorch's: one
    CUDA graph, made here once for the case): the kernels alone, without the host time a
    call."""
    if not replayed:
        return lambda mine: timed(args, mine, peer, ours.sync, sync_peer, calls)
    peer_replay = peer_graph(torch, peer, calls) if peer else None

    def measure(mine):
        replay, release = recorded(ours, mine, calls)
        try:
            t, tp = timed(args, replay, peer_replay, ours.wait, sync_peer, REPLAYS)
        finally:
            release()
            ours.sync()
        return t / calls, (tp / calls if tp else None)
    return measure


def bench_kernels(args, ours, torch) -> list:
    """The matmul cases with host time taken out: each case's chain of products recorded
    once and replayed (``case_timer``), so the ratio compares the kernels and the gaps
    between them, not the per-call cost on the host that the matmul section also
    measures."""
    rows = []
    for name, _, flops, mine, peer, sync_peer in matmul_runs(args, ours, torch):
        measure = case_timer(args, ours, torch, peer, sync_peer, _calls(flops), True)
        t_ours, t_peer = measure(mine)
        rows.append((f"recorded matmul {name} [{tflops(flops, t_ours, t_peer)} TF/s]",
                     t_ours, t_peer, ""))
    # The device's own cost of a dependent dispatch, against a dependent CUDA kernel's in a
    # graph (H200: 1.8 us against 1.1; part of every small product's ratio above).
    for name, mine, peer in floor_cases(ours, torch):
        measure = case_timer(args, ours, torch, peer,
                             torch.cuda.synchronize if torch else None, FLOOR_CALLS, True)
        rows.append((f"recorded floor: {name}, chained", *measure(mine), ""))
    return rows


SWEEP_TILES = dict(plans.TILES, **{
    "128x128 k16": plans.Tile(128, 128, 16, 8, 8),
    "64x256": plans.Tile(64, 256, 16, 8, 8),
    "256x64": plans.Tile(256, 64, 16, 8, 8),
    "128x64": plans.Tile(128, 64, 16, 8, 4),
    "64x128": plans.Tile(64, 128, 16, 4, 8),
    "256x128": plans.Tile(256, 128, 16, 8, 8),
    "64x64 8x4": plans.Tile(64, 64, 16, 8, 4),
    "32x128": plans.Tile(32, 128, 16, 4, 8),
    # K steps of 32 on other shapes than "deep"'s (the best of them on short K, H200:
    # 1.16-1.19 of cuBLAS's kernel time on 1024 x 1024 x 256 and 1024 x 784 x 256, "deep"
    # 1.12-1.14; 512 threads a workgroup, 128 x 64 and 64 x 128 with 4 x 4 a thread, and
    # 128 x 128 x 16 with 8 x 4, were slower still)
    "64x128 k32 4x8": plans.Tile(64, 128, 32, 4, 8),
    "deep half": plans.Tile(64, 64, 32, 8, 4),     # (the plans' choice for a while, where
                                                   # "deep" split K 4 ways or more)
    "deep 8x4": plans.Tile(128, 64, 32, 8, 4),     # ("deep" before its threads took 4 x 8)
    "64x64 k32": plans.Tile(64, 64, 32, 4, 4),
    "tc 128x64": plans.TensorTile(128, 64, 16, 64, 32),
    "tc 128x64 k32": plans.TensorTile(128, 64, 32, 64, 32),
    "tc 128x128": plans.TensorTile(128, 128, 16, 64, 32),
    "tc 64x128": plans.TensorTile(64, 128, 16, 32, 64),
    "tc 64x64": plans.TensorTile(64, 64, 16, 32, 32),
    "tc 256x64": plans.TensorTile(256, 64, 16, 64, 32),
    # warps of 64 x 64 outputs: each block of an operand read from shared memory feeds
    # four products, not two or three
    "tc 128x128 w64": plans.TensorTile(128, 128, 16, 64, 64),
    "tc 128x256 w64": plans.TensorTile(128, 256, 16, 64, 64),
    "tc 256x128 w64": plans.TensorTile(256, 128, 16, 64, 64),
    "tc 128x256": plans.TensorTile(128, 256, 16, 64, 32),
    "tc 256x128": plans.TensorTile(256, 128, 16, 64, 32),
    # for products of one piece (--low), K steps of 32 and 64 (two stages of tiles, the
    # next K step stored beside the one multiplied, one barrier a step: 1.2-1.5 times
    # as long as one stage on an H100 at 4096^3 and 8192^3)
    "tc 128x128 k32": plans.TensorTile(128, 128, 32, 64, 32),
    "tc 128x128 k64": plans.TensorTile(128, 128, 64, 64, 32),
    "tc 128x128 w64 k32": plans.TensorTile(128, 128, 32, 64, 64),
    "tc 128x128 w64 k64": plans.TensorTile(128, 128, 64, 64, 64),
    "tc 128x256 w64 k32": plans.TensorTile(128, 256, 32, 64, 64),
    "tc 256x128 w64 k32": plans.TensorTile(256, 128, 32, 64, 64),
    "tc 128x256 k32": plans.TensorTile(128, 256, 32, 64, 32),
    "tc 256x128 k32": plans.TensorTile(256, 128, 32, 64, 32)})


def sweep_tiles(spec: str) -> dict:
    """The tiles ``--tiles`` names: labels of SWEEP_TILES, or fma tiles written
    BMxBNxBK/TMxTN (e.g. 128x64x32/8x8); every tile of SWEEP_TILES when empty."""
    if not spec:
        return SWEEP_TILES
    tiles = {}
    for label in spec.split(","):
        if label in SWEEP_TILES:
            tiles[label] = SWEEP_TILES[label]
            continue
        shape = re.fullmatch(r"(\d+)x(\d+)x(\d+)/(\d+)x(\d+)", label)
        if shape is None:
            raise SystemExit(f"--tiles: {label!r} is neither a tile of the sweep "
                             f"({', '.join(SWEEP_TILES)}) nor BMxBNxBK/TMxTN")
        tiles[label] = plans.Tile(*map(int, shape.groups()))
    return tiles


def sweepable(tile, m: int, n: int, k: int, limits: tuple, low=None) -> bool:
    """Whether the sweep times ``tile`` on this product on a device of these ``limits``
    (shared memory, threads, tensor cores): it fits them (a tensor tile with the pieces of
    each operand its kernel takes: one under ``low`` bfloat16, three bfloat16 ones under
    float16, two float16 ones for a float32 product), and a tensor tile needs tensor cores
    and a product of whole 16 x 16 blocks."""
    shared, threads, tensor_cores = limits
    if not isinstance(tile, plans.TensorTile):
        return tile.fits(shared, threads)
    pieces = {"bfloat16": 1, "float16": 3, None: 2}[low]
    return (tile.fits(shared, threads, pieces) and tensor_cores
            and m % 16 == 0 and n % 16 == 0)


def sweep_matmul(args, ours, torch) -> None:
    """Every tile (and split K where the grid is small) on every case, each timed in the
    same interleaved rounds as PyTorch's product (as the full run times the plan's), best
    ratio first (best time first without a peer); with ``args.recorded``, the kernels
    alone (recorded chains replayed, as the kernels section times them). Under ``args.low``
    bfloat16 a tensor tile runs as it is (not replaced by plans.one_piece's)."""
    chosen, limits = plans.matmul_plan, ours.backend.device.matmul_limits
    own = plans.ONE_PIECE_TILES
    tiles = sweep_tiles(args.tiles)               # a bad entry stops the run before any case
    how = "recorded and replayed (kernels)" if args.recorded else "one by one"
    print(f"matmul sweep, {how}: tile (splits) ms per call [TFLOP/s] (ratio to PyTorch); "
          "* = the plan's choice")
    try:
        for name, (m, n, k), flops, mine, peer, sync_peer in matmul_runs(args, ours, torch):
            plans.ONE_PIECE_TILES = own
            best = chosen(m, n, k, 1, *limits, 1 if args.low == "bfloat16" else 3)
            if args.low == "bfloat16" and isinstance(best.tile, plans.TensorTile):
                best = best._replace(tile=plans.one_piece(best.tile, limits[0]))
            measure = case_timer(args, ours, torch, peer, sync_peer, _calls(flops),
                                 args.recorded)
            results = []
            for label, tile in tiles.items():
                if not sweepable(tile, m, n, k, limits, args.low):
                    continue
                natural = plans.split_k(tile, m, n, k, 1).splits
                splits = {s for s in (1, 2, 4, 8, 16, natural, 2 * natural)
                          if k >= 4 * s * tile.bk}
                if isinstance(tile, plans.TensorTile):
                    splits = {1}
                    plans.ONE_PIECE_TILES = {tile: tile}    # (one piece: as given)
                for plan in {plans.sliced(tile, k, s) for s in splits | {1}}:
                    plans.matmul_plan = lambda *_: plan
                    t, tp = measure(mine)
                    mark = "*" if (tile, plan.splits) == (best.tile, best.splits) else ""
                    ratio = f" ({t / tp:.2f})" if tp else ""
                    results.append((t / tp if tp else t, f"{label}({plan.splits}){mark} "
                                    f"{t * 1e3:.3f} [{flops / t / 1e12:.1f}]{ratio}", mark))
            results.sort()
            shown = results[:8] + [r for r in results[8:] if r[2]]   # (and the plan's)
            cells = "  ".join(cell for _, cell, _ in shown)
            print(f"  {name:<24} {cells}", flush=True)
    finally:
        plans.matmul_plan, plans.ONE_PIECE_TILES = chosen, own


# -- elementwise and reductions ---------------------------------------------------------------
def bench_memory(args, ours, torch) -> list:
    """Bandwidth-bound kernels over ``args.elements`` float32 elements."""
    n = args.elements
    side = int(round(n ** 0.5))
    rng = np.random.default_rng(3)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    a2 = a[:side * side].reshape(side, side)
    ha, hb, ha2 = ours.put(a), ours.put(b), ours.put(a2)
    ta_ours = dg.ag_param(a)        # (resident, for the public ops' rows: var, logsumexp)
    be = ours.backend
    out = be.empty((n,), persistent=True)
    cases = [   # name, bytes moved, ours, peer(ta, tb, ta2)
        ("add", 12 * n, lambda: be.binary("add", ha, hb, out=out), lambda x, y, x2: x + y),
        ("relu", 8 * n, lambda: be.unary("relu", ha, out=out), lambda x, y, x2: x.relu()),
        ("sum (all)", 4 * n, lambda: be.reduce("sum", ha, (0,)), lambda x, y, x2: x.sum()),
        ("max (all)", 4 * n, lambda: be.reduce("max", ha, (0,)), lambda x, y, x2: x.amax()),
        ("min (all)", 4 * n, lambda: be.reduce("min", ha, (0,)), lambda x, y, x2: x.amin()),
        ("sum of squares (all) / vector_norm", 4 * n,
         lambda: be.reduce("sum_squares", ha, (0,)),
         lambda x, y, x2: torch.linalg.vector_norm(x)),
        ("dg.var (all)", 4 * n, lambda: dg.var(ta_ours), lambda x, y, x2: x.var()),
        ("var (all), the backend's call", 4 * n,
         lambda: be.reduce("var", ha, (0,), divisor=n - 1), lambda x, y, x2: x.var()),
        ("dg.logsumexp (all)", 8 * n, lambda: dg.logsumexp(ta_ours, 0),
         lambda x, y, x2: x.logsumexp(0)),
        ("prod (all)", 4 * n, lambda: be.reduce("prod", ha, (0,)), lambda x, y, x2: x.prod()),
        (f"prod axis 1 of {side}^2", 4 * side * side, lambda: be.reduce("prod", ha2, (1,)),
         lambda x, y, x2: x2.prod(1)),
        (f"sum axis 0 of {side}^2", 4 * side * side, lambda: be.reduce("sum", ha2, (0,)),
         lambda x, y, x2: x2.sum(0)),
        (f"sum axis 1 of {side}^2", 4 * side * side, lambda: be.reduce("sum", ha2, (1,)),
         lambda x, y, x2: x2.sum(1)),
        (f"var axis 0 of {side}^2", 4 * side * side,
         lambda: be.reduce("var", ha2, (0,), divisor=side - 1), lambda x, y, x2: x2.var(0)),
        (f"var axis 1 of {side}^2", 4 * side * side,
         lambda: be.reduce("var", ha2, (1,), divisor=side - 1), lambda x, y, x2: x2.var(1)),
    ]
    if torch:
        ta, tb, ta2 = (torch.from_numpy(v).cuda() for v in (a, b, np.ascontiguousarray(a2)))
    rows = []
    for name, nbytes, mine, theirs in cases:
        peer = (lambda f=theirs: f(ta, tb, ta2)) if torch else None
        t_ours, t_peer = timed(args, mine, peer, ours.sync,
                               torch.cuda.synchronize if torch else None, 20)
        speed = f"{nbytes / t_ours / 1e9:.0f}" + (f"/{nbytes / t_peer / 1e9:.0f}" if t_peer
                                                  else "")
        host, wait, submits = host_share(mine, ours, 20)
        rows.append((f"{name} [{speed} GB/s; host {host * 1e6:.0f}us wait {wait * 1e6:.0f}us, "
                     f"{submits:.2f} submits]",
                     t_ours, t_peer, "<= 1.25"))
    return rows


def bench_unary(args, ours, torch) -> list:
    """Each public unary op's forward over ``args.elements`` float32 elements (8 bytes an
    element: read and write), against PyTorch's."""
    n = args.elements
    rng = np.random.default_rng(4)
    inputs = {k: draw(rng, n).astype(np.float32) for k, draw in UNARY_INPUTS.items()}
    handles = {k: ours.put(v) for k, v in inputs.items()}
    tensors = {k: torch.from_numpy(v).cuda() for k, v in inputs.items()} if torch else {}
    be = ours.backend
    out = be.empty((n,), persistent=True)
    their_out = torch.empty(n, device="cuda") if torch else None   # (each writes in place)
    rows = []
    for op, a, kind, theirs in unary_cases(torch):
        if args.unary and op not in args.unary:
            continue
        h = handles[kind]
        mine = (lambda o=op, h=h, a=a: be.unary(o, h, a, out=out))
        peer = (lambda f=theirs, t=tensors.get(kind): f(t, out=their_out)) if torch else None
        t_ours, t_peer = timed(args, mine, peer, ours.sync,
                               torch.cuda.synchronize if torch else None, 20)
        speed = f"{8 * n / t_ours / 1e9:.0f}" + (f"/{8 * n / t_peer / 1e9:.0f}" if t_peer
                                                 else "")
        rows.append((f"unary {op} [{speed} GB/s]", t_ours, t_peer, "<= 1.25"))
    return rows


def bench_scan(args, ours, torch) -> list:
    """cumsum over ``args.elements`` float32 elements: one line, and rows of 4096, and of
    int32 elements, one line (int32 sums: PyTorch's with dtype=torch.int32), against
    torch.cumsum; cumprod of one line, against torch.cumprod."""
    n = args.elements
    x = np.random.default_rng(6).standard_normal(n).astype(np.float32)
    h = ours.put(x)
    t = torch.from_numpy(x).cuda() if torch else None
    be = ours.backend
    rows = []
    for label, lines in (("one line", 1), ("rows of 4096", n // 4096)):
        length = n // lines
        mine = (lambda h=h, lines=lines, length=length: be.cumsum(h, lines, length, 1, False))
        peer = (lambda t=t, lines=lines, length=length:
                torch.cumsum(t.view(lines, length), 1)) if torch else None
        t_ours, t_peer = timed(args, mine, peer, ours.sync,
                               torch.cuda.synchronize if torch else None, 20)
        rows.append((f"cumsum of {n}, {label}", t_ours, t_peer, "<= 1.25"))
    ints = np.random.default_rng(16).integers(-1000, 1000, n).astype(np.int32)
    hi = ours.put(ints)
    ti = torch.from_numpy(ints).cuda() if torch else None
    t_ours, t_peer = timed(args, lambda: be.cumsum(hi, 1, n, 1, False),
                           (lambda: torch.cumsum(ti, 0, dtype=torch.int32)) if torch else None,
                           ours.sync, torch.cuda.synchronize if torch else None, 20)
    rows.append((f"cumsum of {n} int32, one line", t_ours, t_peer, "<= 1.25"))
    t_ours, t_peer = timed(args, lambda: be.cumprod(h, 1, n, 1, False),
                           (lambda: torch.cumprod(t, 0)) if torch else None,
                           ours.sync, torch.cuda.synchronize if torch else None, 20)
    rows.append((f"cumprod of {n}, one line", t_ours, t_peer, "<= 1.25"))
    return rows


def bench_select(args, ours, torch) -> list:
    """The new elementwise and selection kernels over ``args.elements`` float32 elements:
    atan2, fmod, % and //, a comparison, where, a conversion, int32 reductions, argmax and sort
    (one line, rows of 4096), against PyTorch's."""
    n = args.elements
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    hx, hy = ours.put(x), ours.put(y)
    be = ours.backend
    hc = be.logic("gt", hx, hy)
    tx, ty = (torch.from_numpy(a).cuda() for a in (x, y)) if torch else (None, None)
    tc = tx > ty if torch else None
    ints = rng.integers(-1000, 1000, n).astype(np.int32)
    hi = ours.put(ints)
    ti = torch.from_numpy(ints).cuda() if torch else None
    rows = n // 4096
    cases = [
        ("atan2", lambda: be.binary("atan2", hx, hy), lambda: torch.atan2(tx, ty)),
        ("fmod", lambda: be.binary("fmod", hx, hy), lambda: torch.fmod(tx, ty)),
        ("x % y", lambda: be.binary("remainder", hx, hy), lambda: torch.remainder(tx, ty)),
        ("x // y", lambda: be.binary("floor_divide", hx, hy),
         lambda: torch.floor_divide(tx, ty)),
        ("x > y", lambda: be.logic("gt", hx, hy), lambda: tx > ty),
        ("where", lambda: be.where(hc, hx, hy), lambda: torch.where(tc, tx, ty)),
        ("float to int32", lambda: be.cast(hx, np.int32), lambda: tx.to(torch.int32)),
        # (ours int32, wrapping; PyTorch's sums int64)
        ("int32 sum, one line", lambda: be.int_reduce("int_sum", hi, 1, n, 1),
         lambda: torch.sum(ti)),
        ("int32 sum, rows of 4096", lambda: be.int_reduce("int_sum", hi, rows, 4096, 1),
         lambda: ti.view(rows, 4096).sum(1)),
        ("int32 sum along axis 0 of (rows, 4096)",
         lambda: be.int_reduce("int_sum", hi, 1, rows, 4096),
         lambda: ti.view(rows, 4096).sum(0)),
        ("int32 max, one line", lambda: be.int_reduce("int_max", hi, 1, n, 1),
         lambda: torch.amax(ti)),
        ("argmax, one line", lambda: be.argreduce("argmax", hx, 1, n, 1),
         lambda: torch.argmax(tx)),
        ("argmax, rows of 4096", lambda: be.argreduce("argmax", hx, rows, 4096, 1),
         lambda: torch.argmax(tx.view(rows, 4096), 1)),
        ("sort, rows of 4096", lambda: be.sort(be.reshape(hx, (rows, 4096)), False),
         lambda: torch.sort(tx.view(rows, 4096), 1)),
        ("sort, one line", lambda: be.sort(be.reshape(hx, (1, n)), False),
         lambda: torch.sort(tx)),
    ]
    out = []
    for label, mine, peer in cases:
        t_ours, t_peer = timed(args, mine, peer if torch else None, ours.sync,
                               torch.cuda.synchronize if torch else None, 20)
        # (sorting has no target of its own: a comparison sort against PyTorch's radix sort)
        out.append((f"{label}, {n} elements", t_ours, t_peer,
                    "-" if label.startswith("sort") else "<= 1.25"))
    return out


def bench_optim(args, ours, torch) -> list:
    """One step of each optimizer rule over the MLP 784-H-H-10's parameters (H from
    ``--optim-hidden``), against torch.optim's fused (else foreach) step."""
    hidden = args.optim_hidden
    rows = []
    for label, kind, hyper in OPTIM_CASES:
        mine = ours_optim_step(dg, kind, hyper, hidden)
        peer = torch_optim_step(torch, kind, hyper, hidden, "cuda") if torch else None
        t_ours, t_peer = timed(args, mine, peer, ours.sync,
                               torch.cuda.synchronize if torch else None, 10)
        rows.append((f"{label} step, MLP 784-{hidden}-{hidden}-10", t_ours, t_peer, "<= 1.0"))
    return rows


# -- per-dispatch floor -----------------------------------------------------------------------
FLOOR_CALLS = 50                  # chained calls a wait (one by one) or a recording


def floor_cases(ours, torch) -> list:
    """Tiny kernels, each call writing one output (so each waits for the one before): what
    a dispatch costs when its work is next to nothing. (name, our call, PyTorch's or
    None)."""
    be = ours.backend
    x, out = ours.put(np.ones(64, np.float32)), be.empty((64,), persistent=True)
    a, w = ours.put(np.ones((256, 1024), np.float32)), ours.put(np.ones((10, 1024), np.float32))
    product = be.empty((256, 10), persistent=True)
    cases = [("relu of 64", lambda: be.unary("relu", x, out=out)),
             ("256 x 10 x 1024 product x W^T",
              lambda: product_into(be.device, a, w, product, False, True, (256, 10, 1024, 1)))]
    peers = [None, None]
    if torch:
        tx, tout = torch.ones(64, device="cuda"), torch.empty(64, device="cuda")
        ta, tw = torch.ones(256, 1024, device="cuda"), torch.ones(10, 1024, device="cuda")
        tprod = torch.empty(256, 10, device="cuda")
        peers = [lambda: torch.clamp_min(tx, 0, out=tout),
                 lambda: torch.matmul(ta, tw.t(), out=tprod)]
    return [(name, mine, peer) for (name, mine), peer in zip(cases, peers)]


def bench_floor(args, ours, torch) -> list:
    """The floor cases called one by one: host and device time a dispatch."""
    rows = []
    for name, mine, peer in floor_cases(ours, torch):
        t_ours, t_peer = timed(args, mine, peer, ours.sync,
                               torch.cuda.synchronize if torch else None, FLOOR_CALLS)
        host, _, _ = host_share(mine, ours, FLOOR_CALLS)
        rows.append((f"floor: {name}, chained [host {host * 1e6:.1f}us]", t_ours, t_peer, ""))
    return rows


# -- training step ----------------------------------------------------------------------------
def torch_cuda_step(torch, hidden: int, batch: int, autocast=None):
    """PyTorch eager on CUDA: the batch goes from NumPy to the device each step, as ours;
    ``autocast``: the forward under torch.autocast("cuda") with that dtype."""
    x, y = _mlp_data(hidden, batch)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                          nn.ReLU(), nn.Linear(hidden, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    targets = torch.from_numpy(y).cuda()

    def step():
        with torch.autocast("cuda", dtype=autocast, enabled=autocast is not None):
            loss = nn.functional.cross_entropy(model(torch.from_numpy(x).cuda()), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def replayed_step(hidden: int, batch: int):
    """The same step through ``dg.capture_step``: recorded once, then replayed with the
    batch uploaded each call (warmed up here: one eager call, one recorded)."""
    x, y = _mlp_data(hidden, batch)
    captured = dg.capture_step(mlp_train_step(hidden))

    def step():
        captured(x, y)
    step()
    step()
    if not captured.replayable:
        raise RuntimeError(f"the benchmark step is not replayed: {captured.reason}")
    return step


TRAIN_ROUNDS = 3                  # times the rounds of the other sections: the eager steps
                                  # run at the host's pace, which drifts within a process
                                  # (H200, the eager H 1024 step: one round's ratio 0.36-0.52
                                  # in one process, the median of 3 rounds' 0.38-0.51 over
                                  # processes), so their medians take more rounds


def bench_training(args, ours, torch) -> list:
    rows = []
    step_args = argparse.Namespace(**{**vars(args), "rounds": TRAIN_ROUNDS * args.rounds})
    for hidden, batch in args.train:
        peer = torch_cuda_step(torch, hidden, batch) if torch else None
        target = "<= 1.0" if hidden >= 4096 else "<= 0.5"
        for kind, make in (("", dualgrad_step), (" replayed", replayed_step)):
            mine = make(hidden, batch)
            t_ours, t_peer = timed(step_args, mine, peer, ours.wait,  # each step opens a tape
                                   torch.cuda.synchronize if torch else None, 10)
            host, wait, submits = host_share(mine, ours, 10)
            rows.append((f"Adam step MLP H={hidden} batch={batch}{kind} [host "
                         f"{host * 1e6:.0f}us wait {wait * 1e6:.0f}us, {submits:.1f} submits]",
                         t_ours, t_peer, target))
    return rows


def bench_amp(args, ours, torch) -> list:
    """bfloat16 products (autocast's: float32 operands rounded to bfloat16, float32
    accumulation) against cuBLAS's bfloat16 GEMM, and the GPT's and the MLP 784-H-H-10's
    steps under bfloat16 autocast (eager and replayed) against PyTorch's under
    torch.autocast("cuda", torch.bfloat16)."""
    rows = []
    be = ours.backend
    for size in args.squares[1:] or args.squares:
        a, b = _operands(size, size, size, False, False)
        ha, hb = ours.put(a), ours.put(b)
        out = be.empty((size, size), persistent=True)
        bf16 = np.dtype("bfloat16")
        mine = lambda: product_into(be.device, ha, hb, out, False, False,  # noqa: E731
                                    (size, size, size, 1), low=bf16)
        peer = sync_peer = None
        if torch:
            da, db = (torch.from_numpy(x).cuda().to(torch.bfloat16) for x in (a, b))
            peer, sync_peer = (lambda: torch.matmul(da, db)), torch.cuda.synchronize
        flops = 2.0 * size ** 3
        t_ours, t_peer = timed(args, mine, peer, ours.sync, sync_peer, _calls(flops))
        rows.append((f"bf16 product {size}^3 [{tflops(flops, t_ours, t_peer)} TF/s]",
                     t_ours, t_peer, "<= 2.0"))
    step_args = argparse.Namespace(**{**vars(args), "rounds": TRAIN_ROUNDS * args.rounds})
    shape = args.gpt
    report_memory("GPT step under bf16 autocast", ours,
                  lambda: ours_gpt_step(dg, *shape, False, "bfloat16"), torch,
                  lambda: torch_gpt_step(torch, *shape, "cuda", torch.bfloat16))
    peer = torch_gpt_step(torch, *shape, "cuda", torch.bfloat16) if torch else None
    for kind, replayed, target in (("", False, "<= 1.0"), (" replayed", True, "<= 0.6")):
        mine = ours_gpt_step(dg, *shape, replayed, "bfloat16")
        rows.append((f"GPT AdamW step {shape} bf16 autocast{kind}",
                     *timed(step_args, mine, peer, ours.wait,
                            torch.cuda.synchronize if torch else None, 5), target))
    for hidden, batch in args.train[-1:]:
        x, y = _mlp_data(hidden, batch)
        peer = torch_cuda_step(torch, hidden, batch, torch.bfloat16) if torch else None
        for kind, replayed in (("", False), (" replayed", True)):
            train_step = autocast_step(mlp_train_step(hidden))
            mine = on_batch(dg, train_step, (x, y), replayed, "autocast MLP")
            t_ours, t_peer = timed(step_args, mine, peer, ours.wait,
                                   torch.cuda.synchronize if torch else None, 10)
            rows.append((f"Adam step MLP H={hidden} batch={batch} bf16 autocast{kind}",
                         t_ours, t_peer, "<= 0.8"))
    return rows


def autocast_step(train_step):
    """``train_step`` with its forward under bfloat16 autocast."""
    return dg.autocast("bfloat16")(train_step)


def bench_cnn(args, ours, torch) -> list:
    """The CNN's training step (eager and replayed) and 3x3 convolutions' forward and
    backward, against PyTorch CUDA eager (cuDNN, TF32 off)."""
    rows = []
    sync_peer = torch.cuda.synchronize if torch else None
    step_args = argparse.Namespace(**{**vars(args), "rounds": TRAIN_ROUNDS * args.rounds})
    peer = torch_cnn_step(torch, args.cnn, "cuda") if torch else None
    for kind, replayed in (("", False), (" replayed", True)):
        mine = ours_cnn_step(dg, args.cnn, replayed)
        rows.append((f"CNN Adam step, batch {args.cnn}{kind}",
                     *timed(step_args, mine, peer, ours.wait, sync_peer, 10), "<= 1.5"))
    for channels, size in args.convs:
        mine = ours_conv(dg, args.cnn, channels, size)
        theirs = torch_conv(torch, args.cnn, channels, size, "cuda") if torch else None
        rows.append((f"conv2d 3x3 fwd+bwd {args.cnn}x{channels}x{size}x{size}",
                     *timed(args, mine, theirs, ours.sync, sync_peer, 10), "<= 1.5"))
    return rows


def bench_gpt(args, ours, torch) -> list:
    """The GPT's AdamW step (batch 32, context 128, embedding 256, 4 layers, 8 heads by
    default) against PyTorch CUDA eager, and both steps' peak device memory."""
    batch, context, dim, layers, heads = args.gpt
    shape = (batch, context, dim, layers, heads)
    report_memory("GPT step", ours, lambda: ours_gpt_step(dg, *shape), torch,
                  lambda: torch_gpt_step(torch, *shape, "cuda"))
    peer = torch_gpt_step(torch, *shape, "cuda") if torch else None
    step_args = argparse.Namespace(**{**vars(args), "rounds": TRAIN_ROUNDS * args.rounds})
    name = f"GPT AdamW step B={batch} T={context} E={dim} L={layers} H={heads}"
    rows = []
    for kind, replayed, target in (("", False, "<= 1.0"), (" replayed", True, "<= 0.5")):
        mine = ours_gpt_step(dg, *shape, replayed)
        rows.append((name + kind, *timed(step_args, mine, peer, ours.wait,
                                         torch.cuda.synchronize if torch else None, 5),
                     target))
    return rows


def report_memory(name: str, ours, make_ours, torch, make_peer) -> None:
    """Print the device memory a new model's first two eager steps need at their peak,
    ours and PyTorch's: its parameters, gradients and optimizer state and each step's
    activations (``tape_mem()["peak_bytes"]`` and ``max_memory_allocated``, less what was
    in use before the model was made)."""
    gc.collect()
    dg.reset_peak_memory_stats()
    base = dg.tape_mem()["peak_bytes"]
    mine = make_ours()
    mine()
    mine()
    ours.wait()
    ours_mib = (dg.tape_mem()["peak_bytes"] - base) / 2 ** 20
    del mine
    peer_mib = "n/a"
    if torch:
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        peer = make_peer()
        peer()
        peer()
        torch.cuda.synchronize()
        peer_mib = f"{(torch.cuda.max_memory_allocated() - base) / 2 ** 20:.0f} MiB"
    print(f"{name} device memory at its peak, parameters and optimizer state included: "
          f"ours {ours_mib:.0f} MiB, PyTorch's {peer_mib}")


def bench_attention(args, ours, torch) -> list:
    """Causal attention forward and backward, head dim 64, batch x heads 4 x 8, against
    PyTorch's scaled_dot_product_attention in float32."""
    sync_peer = torch.cuda.synchronize if torch else None
    return [(attention_name(length),
             *timed(args, ours_attention(dg, length),
                    torch_attention(torch, length, "cuda") if torch else None, ours.sync,
                    sync_peer, 3), "<= 1.5")
            for length in args.attention]


def bench_startup(args, ours, torch) -> list:
    """A new process's import and first training step on the gpu, with an empty pipeline
    cache and then with the one that run left (the driver's own shader cache is turned off
    where it can be: NVIDIA's through __GL_SHADER_DISK_CACHE, Mesa's through
    MESA_SHADER_CACHE_DISABLE), so the difference is what our cache saves."""
    no_driver_cache = {"__GL_SHADER_DISK_CACHE": "0", "MESA_SHADER_CACHE_DISABLE": "true"}
    with tempfile.TemporaryDirectory() as cache:
        first_step_seconds(None, "gpu", DUALGRAD_CACHE_DIR="")      # Numba's cache warm
        cold = [first_step_seconds(None, "gpu", DUALGRAD_CACHE_DIR="", **no_driver_cache)
                for _ in range(3)]
        first_step_seconds(None, "gpu", DUALGRAD_CACHE_DIR=cache, **no_driver_cache)
        warm = [first_step_seconds(None, "gpu", DUALGRAD_CACHE_DIR=cache, **no_driver_cache)
                for _ in range(3)]
    print(f"Start-up on the gpu (new process: import dualgrad + one training step), medians "
          f"of 3: no pipeline cache {statistics.median(cold):.3f}s, with the one a first run "
          f"left {statistics.median(warm):.3f}s")
    return []


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--sweep", action="store_true",
                   help="time every matmul tile and split K instead")
    p.add_argument("--recorded", action="store_true",
                   help="with --sweep: time each plan's kernels (a chain of products "
                        "recorded once and replayed), not its calls one by one")
    p.add_argument("--overlap", action="store_true",
                   help="our products are independent calls, which may overlap on the "
                        "device; by default they all write one output, so each waits for "
                        "the one before, as PyTorch's stream runs them")
    p.add_argument("--sections", default="matmul,kernels,memory,unary,scan,select,optim,"
                   "train,cnn,gpt,attention,amp,startup",
                   help="any of matmul, kernels (the matmul and floor cases recorded once "
                        "and replayed: no host time), memory, unary (each public unary "
                        "op), train, cnn (a CNN's step, convolutions), gpt (a GPT's step), amp (the "
                        "MLP step under bfloat16 autocast), startup, "
                        "floor (tiny "
                        "chained kernels)")
    p.add_argument("--only", default="", help="the matmul cases whose name contains this "
                   "text (e.g. 'g3^T h'), in the matmul and kernels sections and the sweep")
    p.add_argument("--tiles", default="", help="with --sweep: only these tiles, by label or "
                   "as BMxBNxBK/TMxTN (e.g. 'deep,128x64x32/8x8')")
    p.add_argument("--low", choices=("bfloat16", "float16"), default=None,
                   help="the matmul cases (sections and sweep) as autocast's products: "
                        "operands rounded to this type, against PyTorch's products of "
                        "operands stored in it")
    p.add_argument("--unary", default="", help="the unary section's ops (e.g. 'erf,asinh'); "
                   "every public unary op when empty")
    p.add_argument("--squares", default="1024,4096,8192")
    p.add_argument("--mlp-shapes", default="1024:256,4096:1024", help="H:batch,...")
    p.add_argument("--gpt-products", action="store_true",
                   help="the matmul cases (sections and sweep) include the products of "
                        "the GPT step's layers (--gpt's batch, context and embedding)")
    p.add_argument("--elements", type=int, default=1 << 24)
    p.add_argument("--optim-hidden", type=int, default=4096, help="H of the optim section's "
                   "MLP 784-H-H-10")
    p.add_argument("--train", default="256:128,1024:256,4096:1024", help="H:batch,...")
    p.add_argument("--cnn", type=int, default=128, help="the batch of the cnn section")
    p.add_argument("--convs", default="64:56,128:28,256:14",
                   help="channels:size of the cnn section's convolutions")
    p.add_argument("--gpt", default="32,128,256,4,8",
                   help="batch,context,embedding,layers,heads of the gpt section's step")
    p.add_argument("--attention", default="1024,2048,4096",
                   help="sequence lengths of the attention section")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    if args.tiny:
        args.squares, args.mlp_shapes, args.elements = "64", "32:16", 4096
        args.train, args.repeats, args.rounds = "32:16", 2, 1
        args.cnn, args.convs, args.gpt, args.attention = 4, "4:8", "2,8,16,1,2", "16"
    args.squares = [int(s) for s in args.squares.split(",") if s]
    args.mlp_shapes, args.train = _sizes(args.mlp_shapes), _sizes(args.train)
    args.convs = _sizes(args.convs)
    args.gpt = tuple(int(n) for n in args.gpt.split(","))
    args.attention = [int(n) for n in args.attention.split(",") if n]
    args.sections = args.sections.split(",")
    args.unary = chosen_ops(p, args.unary)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    dg.ag_device("gpu")
    ours, torch = Ours(), cuda_torch()
    peer = f"{torch.cuda.get_device_name()} (PyTorch {torch.__version__})" if torch else "n/a"
    print(f"ours: {ours.backend.ctx.name}; peer: {peer}")
    if args.sweep:
        sweep_matmul(args, ours, torch)
        return 0
    rows = []
    for section, fn in (("matmul", bench_matmul), ("kernels", bench_kernels),
                        ("memory", bench_memory), ("unary", bench_unary),
                        ("scan", bench_scan), ("select", bench_select),
                        ("optim", bench_optim), ("cnn", bench_cnn), ("gpt", bench_gpt),
                        ("attention", bench_attention), ("amp", bench_amp),
                        ("train", bench_training), ("floor", bench_floor),
                        ("startup", bench_startup)):
        if section in args.sections:
            rows += fn(args, ours, torch)
    report(rows, "GPU backend vs PyTorch CUDA (f32, TF32 off); ratio = ours / peer time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
