"""Shared timing for the benchmarks: medians of interleaved runs, ratios against a peer.

Ours and the peer are timed in alternation (ours, peer, ours, peer, ...) so that a noisy
machine slows both alike; each figure is the median of the repeats. A ratio is
ours / peer in time: lower is better, below 1 means we are faster.
"""
from __future__ import annotations

import statistics
import time

# Which side this process times: "both" (in alternation), "ours" or "peer" alone (the
# other's time is then None; bench/apart.py runs the sides in processes of their own).
SIDE = "both"
ROWS: list = []                   # every row ``report`` printed, for a --json dump


def median_time(fn, repeats: int, sync=None) -> float:
    """The median wall time of ``fn()`` over ``repeats`` calls, in seconds. ``sync`` (if
    given) is called after each call and timed with it: it waits for queued device work."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved(ours, peer, repeats: int, rounds: int = 5, sync_ours=None, sync_peer=None):
    """(ours, peer) median seconds per call, timed in ``rounds`` alternating rounds of
    ``repeats`` calls each; ``peer`` may be None (no peer installed): its time is then None."""
    mine, theirs = [], []
    for _ in range(rounds):
        if SIDE != "peer":
            mine.append(median_time(ours, repeats, sync_ours))
        if peer is not None and SIDE != "ours":
            theirs.append(median_time(peer, repeats, sync_peer))
    return (statistics.median(mine) if mine else None,
            statistics.median(theirs) if theirs else None)


def torch_or_none():
    """PyTorch if it is installed (a benchmark-only peer, never a dependency), else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def report(rows, title: str) -> None:
    """Print a table of (name, ours_s, peer_s, target) rows with the ratio ours / peer."""
    print(title)
    print(f"  {'case':<40} {'ours':>11} {'peer':>11} {'ratio':>7}  target")
    for name, ours, peer, target in rows:
        ROWS.append({"section": title, "case": name, "ours": ours, "peer": peer,
                     "target": target})
        ours_text = f"{ours * 1e3:9.3f}ms" if ours else "       n/a"
        peer_text = f"{peer * 1e3:9.3f}ms" if peer else "       n/a"
        ratio = f"{ours / peer:7.3f}" if peer and ours else "    n/a"
        print(f"  {name:<40} {ours_text:>11} {peer_text:>11} {ratio}  {target or ''}")


def on_batch(dg, train_step, batch: tuple, replayed: bool, name: str):
    """fn(): ``train_step(*batch)``, eager or (``replayed``) through ``dg.capture_step``,
    recorded once and warmed up here; a step that does not replay is an error."""
    if not replayed:
        return lambda: train_step(*batch)
    captured = dg.capture_step(train_step)
    captured(*batch)
    captured(*batch)
    if not captured.replayable:
        raise RuntimeError(f"the {name} step is not replayed: {captured.reason}")
    return lambda: captured(*batch)


def classifier_step(dg, model, opt):
    """fn(x, y): one step of ``opt`` on ``model``'s softmax cross-entropy, returning the
    loss (the batch uploaded each step)."""
    def train_step(x, y):
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(model(dg.ag_tensor(x)), y)
            loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return train_step
