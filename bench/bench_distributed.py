"""Data-parallel speed (dualgrad.distributed): the gradient all-reduce's bandwidth against a
host memory copy of the same bytes, and the scaling efficiency of a training step: one
step's time in one process with batch B over its time in k processes with batch B each
(1.0: the processes cost nothing extra; each process has the same share of the machine
in both: cores / k threads on the cpu, the same GPU on the gpu). PyTorch's
DistributedDataParallel (gloo on the cpu, NCCL on CUDA) is measured the same way in the
same command where it is installed.

    python3 bench/bench_distributed.py                    # cpu, 2 processes (RESULTS.md)
    python3 bench/bench_distributed.py --backend gpu      # 2 processes sharing one GPU
    python3 bench/bench_distributed.py --mlp 256:16 --gpt none --sizes 1 --steps 3  # smoke

Every process runs under the ``mpiexec`` beside this interpreter (the mpich wheel).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

GPT_SHAPE = dict(context=128, dim=256, layers=4, heads=8)      # the layers issue's model


# -- in each process -------------------------------------------------------------------------

def _median_step(step, sync, barrier, steps: int) -> float:
    for _ in range(2):
        step()
    sync()
    times = []
    for _ in range(steps):
        barrier()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker_allreduce(args) -> dict:
    """Per size: our bucket average (as a step's buckets make it), MPI's own Allreduce of
    the same array and a copy of its bytes in host memory, median seconds."""
    import dualgrad.distributed as dist
    from dualgrad.distributed.reducer import averager
    w = dist.init("cpu")
    comm = w.split()
    found = []
    for mib in args.sizes:
        n = int(mib * 2**20) // 4 // w.size * w.size
        ours = averager(w, comm, n, np.float32)
        ours.array[:] = 1.0
        array, out, copy = np.ones(n, np.float32), np.empty(n, np.float32), np.empty(n, np.float32)
        mine = _timed(lambda: ours.average("bench"), comm, args.repeats)
        theirs = _timed(lambda: comm.Allreduce(array, out), comm, args.repeats)
        host = _timed(lambda: np.copyto(copy, array), comm, args.repeats)
        ours.close()
        found.append({"mib": mib, "ours": mine, "mpi": theirs, "copy": host,
                      "how": type(ours).__name__})
    return {"allreduce": found}


def _timed(fn, comm, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        comm.Barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker_step(args) -> dict:
    import dualgrad as dg
    import dualgrad.distributed as dist
    from timing import classifier_step, on_batch
    from gpt_cases import gpt_data, gpt_train_step, ours_gpt_model
    w = dist.init(args.backend)
    dg.manual_seed(0)
    if args.case == "mlp":
        hidden, batch = args.mlp
        nn = dg.nn
        model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                              nn.ReLU(), nn.Linear(hidden, 10))
        rng = np.random.default_rng(w.rank)
        batch_data = (rng.standard_normal((batch, 784)).astype(np.float32),
                      rng.integers(0, 10, batch))
        make_step = classifier_step
    else:
        model = ours_gpt_model(dg, **GPT_SHAPE)
        batch_data = gpt_data(args.gpt, GPT_SHAPE["context"])
        make_step = gpt_train_step
    if args.ddp:
        model = dist.DistributedDataParallel(model)
    opt = dg.optim.AdamW(model.parameters(), lr=1e-3)
    run = on_batch(dg, make_step(dg, model, opt), batch_data, args.replayed, args.case)
    last = []
    seconds = _median_step(lambda: last.append(run()), lambda: last[-1].item(),
                           dist.barrier, args.steps)
    return {"seconds": seconds}


def worker_torch_step(args) -> dict:
    """The same step in PyTorch, DDP over gloo (cpu) or NCCL (cuda) when ``--ddp``."""
    import torch
    import torch.distributed as tdist
    from mpi4py import MPI
    from gpt_cases import gpt_data, torch_gpt_loss, torch_gpt_model
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    cuda = args.backend == "gpu"
    device = "cuda" if cuda else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    if args.ddp:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
        # NCCL where each process has a GPU of its own; it refuses two on one device
        nccl = cuda and torch.cuda.device_count() >= size
        if cuda:
            torch.cuda.set_device(rank % torch.cuda.device_count())
        tdist.init_process_group("nccl" if nccl else "gloo", rank=rank, world_size=size)
    torch.manual_seed(0)
    if args.case == "mlp":
        hidden, batch = args.mlp
        nn = torch.nn
        model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                              nn.ReLU(), nn.Linear(hidden, 10)).to(device)
        rng = np.random.default_rng(rank)
        batch_data = (torch.from_numpy(rng.standard_normal((batch, 784)).astype(np.float32)),
                      torch.from_numpy(rng.integers(0, 10, batch)))
        loss_of = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)  # noqa: E731
    else:
        model = torch_gpt_model(torch, device=device, **GPT_SHAPE)
        batch_data = (torch.from_numpy(a.astype(np.int64))
                      for a in gpt_data(args.gpt, GPT_SHAPE["context"]))
        loss_of = lambda m, x, y: torch_gpt_loss(torch, m, x, y)  # noqa: E731
    x, y = (t.to(device) for t in batch_data)
    if args.ddp:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        loss_of(model, x, y).backward()
        opt.step()
        opt.zero_grad()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    seconds = _median_step(step, sync, comm.Barrier, args.steps)
    if args.ddp:
        tdist.destroy_process_group()
    return {"seconds": seconds}


# -- the launcher ------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(n: int, job: str, args, *extra: str) -> dict | None:
    """Run ``job`` in ``n`` processes; rank 0's JSON, or None where it failed."""
    threads = str(max(1, (os.cpu_count() or 1) // args.ranks))
    env = dict(os.environ, NUMBA_NUM_THREADS=threads, OMP_NUM_THREADS=threads,
               OPENBLAS_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    from dualgrad.distributed import mpi_launcher
    cmd = [mpi_launcher() or "mpiexec", "-n", str(n), sys.executable, __file__, "--worker", job,
           "--backend", args.backend, "--steps", str(args.steps), "--repeats",
           str(args.repeats), "--sizes", ",".join(map(str, args.sizes)),
           "--mlp", f"{args.mlp[0]}:{args.mlp[1]}", "--gpt", str(args.gpt or "none"),
           "--port", str(_free_port()), *extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        print(f"  ({job} {' '.join(extra)} in {n} processes failed: "
              f"{(done.stderr.strip().splitlines() or ['?'])[-1]})")
        return None
    return json.loads(lines[-1])


def _torch_present() -> bool:
    try:
        return importlib.util.find_spec("torch.distributed") is not None
    except ImportError:                 # (no torch at all)
        return False


def launch(args) -> None:
    k = args.ranks
    print(f"data parallel, {k} processes, {args.backend} backend "
          f"({max(1, (os.cpu_count() or 1) // k)} cpu threads each)")
    found = _run(k, "allreduce", args) if "allreduce" in args.sections else None
    if found:
        print(f"gradient all-reduce (float32, in host memory; ours: "
              f"{found['allreduce'][0]['how']}), bandwidth per process")
        print(f"  {'MiB':>6} {'ours':>10} {'MPI Allreduce':>14} {'host copy':>10} "
              f"{'ours/copy':>10}  goal >= 0.5")
        for row in found["allreduce"]:
            gbs = {key: row["mib"] * 2**20 / row[key] / 1e9 for key in ("ours", "mpi", "copy")}
            print(f"  {row['mib']:>6g} {gbs['ours']:>7.2f}GB/s {gbs['mpi']:>11.2f}GB/s "
                  f"{gbs['copy']:>7.2f}GB/s {gbs['ours'] / gbs['copy']:>10.3f}")
    cases = [("mlp", f"MLP 784-{args.mlp[0]}-{args.mlp[0]}-10, batch {args.mlp[1]}")]
    if args.gpt:
        cases.append(("gpt", f"GPT {GPT_SHAPE}, batch {args.gpt}"))
    peers = [("ours", "step", ())]
    if args.backend == "gpu":
        peers.append(("ours, replayed", "step", ("--replayed",)))
    if args.peer and _torch_present():
        peers.append(("PyTorch DDP", "torch_step", ()))
    if "scaling" not in args.sections:
        return
    print("scaling efficiency: a step alone (batch B) / a step in k processes (B each)")
    for case, title in cases:
        print(f"  {title}")
        for name, job, extra in peers:
            alone = _run(1, job, args, "--case", case, *extra)
            together = _run(k, job, args, "--case", case, "--ddp", *extra)
            if alone and together:
                print(f"    {name:<15} alone {alone['seconds'] * 1e3:9.2f} ms   {k} processes "
                      f"{together['seconds'] * 1e3:9.2f} ms   efficiency "
                      f"{alone['seconds'] / together['seconds']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--sections", default="allreduce,scaling",
                        type=lambda t: {s for s in t.split(",") if s},
                        help="what to measure: allreduce (bandwidth), scaling (steps)")
    parser.add_argument("--sizes", default="1,4,25,100",
                        type=lambda t: [float(s) for s in t.split(",") if s])
    parser.add_argument("--mlp", default="4096:64",
                        type=lambda t: tuple(int(s) for s in t.split(":")))
    parser.add_argument("--gpt", default="8", type=lambda t: None if t == "none" else int(t),
                        help="the GPT benchmark model's batch per process ('none': skip)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-peer", dest="peer", action="store_false",
                        help="leave PyTorch out even where it is installed")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--case", default="mlp", help=argparse.SUPPRESS)
    parser.add_argument("--ddp", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--replayed", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=29500, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is None:
        launch(args)
        return
    result = {"allreduce": worker_allreduce, "step": worker_step,
              "torch_step": worker_torch_step}[args.worker](args)
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
