"""Data-parallel cases, run in every process of ``mpiexec -n N python cases.py BACKEND OUT
CASE...`` by tests/test_distributed.py. Rank 0 writes what each case found to the JSON
file OUT; the test asserts on it."""
import hashlib
import json
import sys

import numpy as np

import dualgrad as dg
import dualgrad.distributed as dist
from conftest import train_step       # (tests/ is on the path: test_distributed.py)

FEATURES, CLASSES, BATCH = 12, 4, 8          # BATCH samples per process and step


def data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, FEATURES)).astype(np.float32),
            rng.integers(0, CLASSES, n))


def make_model(seed: int, hidden: int = 16):
    dg.manual_seed(seed)
    return dg.nn.Sequential(dg.nn.Linear(FEATURES, hidden), dg.nn.Tanh(),
                            dg.nn.Linear(hidden, hidden), dg.nn.ReLU(),
                            dg.nn.Linear(hidden, CLASSES))


def make_optimizer(kind: str, params):
    if kind == "sgd":
        return dg.optim.SGD(params, lr=0.1, momentum=0.9)
    return dg.optim.Adam(params, lr=1e-2)


def step(model, opt, x, y) -> float:
    return train_step(model, opt, x, y).item()


def digests_of(tensors) -> list:
    return [hashlib.sha256(t.numpy().tobytes()).hexdigest() for t in tensors]


def digests(model) -> list:
    return digests_of(model.parameters())


def relative_gap(a: list, b: list) -> float:
    """The largest normwise relative difference between matching arrays."""
    return max(float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-30))
               for x, y in zip(a, b))


def values(model) -> list:
    return [p.numpy().astype(np.float64) for p in model.parameters()]


def equivalence(w, kind: str, steps: int = 6) -> dict:
    """k processes with BATCH samples each against one model stepped with all k * BATCH
    samples (computed in every process, from the same start)."""
    x, y = data(BATCH * w.size * steps)
    ddp = dist.DistributedDataParallel(make_model(seed=100 + w.rank), bucket_mb=0.001)
    for bucket in ddp._reducer.buckets:      # more threads than the 2-core machine's share:
        if hasattr(bucket.averager, "threads"):    # each process sums in three parts
            bucket.averager.threads = 3
    opt = make_optimizer(kind, ddp.parameters())
    alone = make_model(seed=0)
    alone.load_state_dict(ddp.module.state_dict())
    opt_alone = make_optimizer(kind, alone.parameters())
    events = watch_overlap(ddp)
    gaps, identical = [], True
    for s in range(steps):
        big = slice(s * BATCH * w.size, (s + 1) * BATCH * w.size)
        mine = slice(big.start + w.rank * BATCH, big.start + (w.rank + 1) * BATCH)
        step(ddp, opt, x[mine], y[mine])
        step(alone, opt_alone, x[big], y[big])
        gaps.append(relative_gap(values(ddp.module), values(alone)))
        identical &= all(d == digests(ddp.module) for d in dist.all_gather_object(
            digests(ddp.module)))
    n_buckets = len(ddp.buckets)
    how = type(ddp._reducer.buckets[0].averager).__name__
    # whether the device copies straight into the averaged arrays (the cpu always does; a
    # GPU that imports host memory too)
    direct = all(b.buffer.array is b.averager.array for b in ddp._reducer.buckets)
    ddp.close()
    first_step = events[:events.index("end") + 1]
    overlapped = first_step.index("handed 0") < len(first_step) - 1 - \
        first_step[::-1].index("ready")
    return {"gaps": gaps, "identical": bool(identical), "buckets": n_buckets, "how": how,
            "overlapped": bool(overlapped), "direct": bool(direct)}


def watch_overlap(ddp) -> list:
    """A log of the reducer's events: "ready" (a parameter's gradient is final),
    "handed i" (bucket i went to the all-reduce thread), "end" (the pass's averages were
    collected)."""
    reducer, events = ddp._reducer, []
    ready, hand, collect = reducer.ready, reducer._hand, reducer._collect

    def logged(name, fn, label):
        def call(*args):
            events.append(label(*args))
            return fn(*args)
        object.__setattr__(reducer, name, call)

    logged("ready", ready, lambda p: "ready")
    logged("_hand", hand, lambda index, landing: f"handed {index}")
    logged("_collect", collect, lambda: "end")
    return events


def accumulation(w, micro: int = 3) -> dict:
    """``micro`` backward passes (all but the last under no_sync) against one pass over
    the same samples: the loss of each pass is divided by ``micro``."""
    x, y = data(BATCH * w.size * micro, seed=1)
    ddp = dist.DistributedDataParallel(make_model(seed=7))
    opt = make_optimizer("sgd", ddp.parameters())
    alone = make_model(seed=7)
    opt_alone = make_optimizer("sgd", alone.parameters())
    for m in range(micro):
        part = slice((w.rank * micro + m) * BATCH, (w.rank * micro + m + 1) * BATCH)
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(ddp(dg.ag_tensor(x[part])), y[part]) / micro
            if m < micro - 1:
                with ddp.no_sync():
                    loss.backward()
                local = digests_of(p.grad for p in ddp.module.parameters())
            else:
                loss.backward()
    kept_local = len(set(map(tuple, dist.all_gather_object(local)))) == w.size
    opt.step()
    step(alone, opt_alone, x, y)
    ddp.close()
    return {"gap": relative_gap(values(ddp.module), values(alone)),
            "kept_local": bool(kept_local)}


class _WithUnused(dg.nn.Module):
    """A model one of whose layers takes part only on rank 0."""

    def __init__(self):
        super().__init__()
        self.body = make_model(seed=12)
        self.extra = dg.nn.Linear(CLASSES, CLASSES)

    def forward(self, x, use_extra: bool):
        out = self.body(x)
        return self.extra(out) if use_extra else out


def unused(w) -> dict:
    """A parameter with no gradient in some processes counts as a zero gradient there:
    every process gets the average, the replicas stay identical, nothing waits."""
    x, y = data(BATCH * w.size, seed=13)
    ddp = dist.DistributedDataParallel(_WithUnused(), bucket_mb=0.001)
    opt = make_optimizer("sgd", ddp.parameters())
    mine = slice(w.rank * BATCH, (w.rank + 1) * BATCH)
    with dg.with_grad_tape():
        loss = dg.softmax_cross_entropy(ddp(dg.ag_tensor(x[mine]), w.rank == 0), y[mine])
        loss.backward()
    extra = list(ddp.module.extra.parameters())
    grads = digests_of(p.grad for p in extra)
    same_grads = all(d == grads for d in dist.all_gather_object(grads))
    nonzero = all(p.grad.numpy().any() for p in extra)
    opt.step()
    same = all(d == digests(ddp.module) for d in dist.all_gather_object(digests(ddp.module)))
    ddp.close()
    return {"identical": bool(same), "same_grads": bool(same_grads),
            "extra_grads_nonzero": bool(nonzero)}


def mismatch(w) -> dict:
    """Processes with different models: every one raises, naming the difference."""
    hidden = 16 if w.rank == 0 else 17
    try:
        dist.DistributedDataParallel(make_model(seed=0, hidden=hidden))
    except dist.DistributedMismatch as exc:
        return {"raised": str(exc)}
    return {"raised": None}


def capture(w, steps: int = 5) -> dict:
    """Steps with the all-reduce under capture_step: recorded in parts around the host's
    average and replayed, training as the eager single process does."""
    x, y = data(BATCH * w.size * steps, seed=2)
    ddp = dist.DistributedDataParallel(make_model(seed=3), bucket_mb=0.001)
    opt = make_optimizer("adam", ddp.parameters())
    alone = make_model(seed=3)
    opt_alone = make_optimizer("adam", alone.parameters())
    captured = dg.capture_step(lambda a, b: train_step(ddp, opt, a, b))
    gaps, identical = [], True
    for s in range(steps):
        big = slice(s * BATCH * w.size, (s + 1) * BATCH * w.size)
        mine = slice(big.start + w.rank * BATCH, big.start + (w.rank + 1) * BATCH)
        captured(x[mine], y[mine])
        step(alone, opt_alone, x[big], y[big])
        gaps.append(relative_gap(values(ddp.module), values(alone)))
        identical &= all(d == digests(ddp.module) for d in dist.all_gather_object(
            digests(ddp.module)))
    ddp.close()
    return {"reason": captured.reason, "replays": captured.replays, "gaps": gaps,
            "identical": bool(identical)}


def save(w, path: str) -> dict:
    """Train three steps, save; report the parameters saved."""
    x, y = data(BATCH * w.size * 3, seed=4)
    ddp = dist.DistributedDataParallel(make_model(seed=5))
    opt = make_optimizer("adam", ddp.parameters())
    for s in range(3):
        part = slice((s * w.size + w.rank) * BATCH, (s * w.size + w.rank + 1) * BATCH)
        step(ddp, opt, x[part], y[part])
    dist.save_checkpoint(path, ddp, opt, extra={"steps": 3, "world": w.size})
    return {"params": [v.tolist() for v in values(ddp.module)]}


def resume(w, path: str) -> dict:
    """Load into a model of a different start and train on: identical everywhere."""
    ddp = dist.DistributedDataParallel(make_model(seed=50 + w.rank))
    opt = make_optimizer("adam", ddp.parameters())
    extra = dist.load_checkpoint(path, ddp, opt)
    loaded = values(ddp.module)
    identical = all(d == digests(ddp.module) for d in dist.all_gather_object(
        digests(ddp.module)))
    x, y = data(BATCH * w.size, seed=6)
    step(ddp, opt, x[w.rank * BATCH:(w.rank + 1) * BATCH], y[w.rank * BATCH:(w.rank + 1) * BATCH])
    identical &= all(d == digests(ddp.module) for d in dist.all_gather_object(
        digests(ddp.module)))
    return {"extra": extra, "params": [v.tolist() for v in loaded],
            "identical": bool(identical), "steps": [int(s.get("step", 0)) for s in opt.state]}


def fail(w) -> dict:
    """Rank 1 raises in its second step; the others go on into the all-reduce."""
    x, y = data(BATCH * w.size * 3, seed=8)
    ddp = dist.DistributedDataParallel(make_model(seed=9))
    opt = make_optimizer("sgd", ddp.parameters())
    for s in range(3):
        if s == 1 and w.rank == 1:
            raise RuntimeError("a failure in rank 1's data")
        part = slice((s * w.size + w.rank) * BATCH, (s * w.size + w.rank + 1) * BATCH)
        step(ddp, opt, x[part], y[part])
    return {}


def stall(w) -> dict:
    """Rank 1 stops answering (a hung process) before its first backward pass; the
    others' all-reduce gives up after the world's timeout."""
    import time
    x, y = data(BATCH * w.size, seed=8)
    ddp = dist.DistributedDataParallel(make_model(seed=9))
    opt = make_optimizer("sgd", ddp.parameters())
    if w.rank == 1:
        time.sleep(600)
    step(ddp, opt, x[:BATCH], y[:BATCH])
    return {}


def main() -> None:
    backend, out, *cases = sys.argv[1:]
    w = dist.init(backend, timeout=float(dict(a.split("=") for a in cases if "=" in a)
                                          .get("timeout", 120)))
    found = {"world": w.size, "device": w.device}
    for case in cases:
        name, _, arg = case.partition(":")
        if name == "timeout=" or "=" in name:
            continue
        if name in ("equivalence_sgd", "equivalence_adam"):
            found[name] = equivalence(w, name.rpartition("_")[2])
        elif name in ("save", "resume"):
            found[name] = globals()[name](w, arg)
        else:
            found[name] = globals()[name](w)
    if w.rank == 0:
        with open(out, "w") as f:
            json.dump(found, f)
    dist.barrier()


if __name__ == "__main__":
    main()
