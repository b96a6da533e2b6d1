"""``dualgrad verify``: run the differential suite on this machine's Vulkan device.

Every primitive runs on the cpu reference and on the device with the same Hypothesis-drawn
inputs and is compared under the tolerance table; then three small models train in lockstep
on both backends, one of them also under bfloat16 and float16 autocast. Prints a table per tolerance-table entry, optionally writes the same as JSON,
and returns a non-zero exit status on any disagreement. Needs no pytest.
"""
from __future__ import annotations

import contextlib
import json
import math
import platform
import sys
import time
import warnings

import numpy as np

from . import __version__
from .api import device
from .errors import InvalidValueError
from .progress import Progress
from .testing import CHECKS, Pair, run_check
from .testing.differential import EntryStats
from .testing.lockstep import default_loss, lockstep
from .testing.models import MODELS

LOCKSTEP_STEPS = 20
LOCKSTEP_TOLERANCE = 1e-4
# Under autocast a product rounds its inputs and its result to 16 bits: where the backends'
# float32 values differ by an ULP or so, a rounding can fall on either side, one 16-bit unit
# apart, and Adam carries such flips on. The model is a smooth one (tanh): in a ReLU model a
# pre-activation rounded to 16 bits near 0 (float16's smallest steps are 6e-8 apart) turns a
# unit's gradient on or off, a jump that Adam carries to lr-sized steps (mlp_classifier:
# 4e-2 at step 19 under float16, measured, with no fault). Measured (lavapipe, regression, 20
# steps): at most 7.1e-6 for float16, 1.6e-7 for bfloat16. A product whose result skips its
# rounding on one backend is 4e-4 apart or more from step 1 (float16), 6e-3 (bfloat16);
# one that skips rounding its inputs, further still: the bound 1e-4 tells them apart.
AUTOCAST_LOCKSTEP_TOLERANCE = 1e-4
LEGEND = ("max |err|, max rel: largest difference from the cpu; max ULP: in float32 units in "
          "the last place; of bound: worst error / allowed (<= 1 agrees); gamma(n)*S: the "
          "bound of an n-term float32 sum, n*2^-24/(1-n*2^-24) times S, the sum of the terms' "
          "magnitudes (docs/numerics.md)")


AUTOCAST_MODEL = "regression"
LOCKSTEP_TITLE = (f"lockstep: {len(MODELS)} models, {LOCKSTEP_STEPS} Adam steps each, "
                  f"{AUTOCAST_MODEL} also under bfloat16 and float16 autocast")


def _lockstep_runs(steps: int) -> dict:
    """The reference models in lockstep with Adam for ``steps`` steps, and one of them
    again under each autocast type (its products' rounding points, the same on both)."""
    from .api.autocast import autocast
    from .api.optimizers import optimizer_adam
    runs = [(name, factory, batches, default_loss, LOCKSTEP_TOLERANCE)
            for name, (factory, batches) in MODELS.items()]
    factory, batches = MODELS[AUTOCAST_MODEL]
    runs += [(f"{AUTOCAST_MODEL} under {low} autocast", factory, batches,
              autocast(low)(default_loss), AUTOCAST_LOCKSTEP_TOLERANCE)
             for low in ("bfloat16", "float16")]
    return {name: lockstep(factory, lambda p: optimizer_adam(p, lr=1e-2), batches(steps),
                           loss_fn=loss_fn, tolerance=bound, device=device.ag_device())
            for name, factory, batches, loss_fn, bound in runs}


def verify(device_name: str = "gpu", examples: int = 25, seed: int | None = None,
           only: str | None = None, out=None) -> dict:
    """Run every check (whose name contains ``only``, if given) for ``examples`` examples
    on ``device_name`` against the cpu, then the lockstep models; print progress and the
    tables to ``out`` (default stdout) and return the report (``report["ok"]`` says whether
    all agreed)."""
    out = out if out is not None else sys.stdout
    checks = [c for c in CHECKS if not only or only in c.name]
    if not checks:
        raise InvalidValueError(f"verify: argument 'only' ({only!r}) is in no check's name; "
                                f"names look like {', '.join(c.name for c in CHECKS[:3])}")
    previous = device.ag_device(device_name)
    try:
        with _quiet_numpy():
            return _verify(checks, examples, seed, only, out)
    finally:
        device.ag_device(previous)


@contextlib.contextmanager
def _quiet_numpy():
    """Overflow and invalid-value warnings of the references' NumPy arithmetic are expected
    (the inputs include infinities and NaN) and would read like faults."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _verify(checks, examples, seed, only, out) -> dict:
    gpu = device.active()
    info = gpu.ctx.info
    print(f"dualgrad {__version__} verify: {info['name']} (Vulkan {info['api_version']}, "
          f"driver {info['driver']}), {examples} examples per check"
          f"{'' if seed is None else f', seed {seed}'}", file=out, flush=True)
    pair = Pair(gpu)
    reports, started = [], time.perf_counter()
    progress = Progress(len(checks), "verify", out)
    for i, chk in enumerate(checks, start=1):
        t0 = time.perf_counter()
        progress.show(i - 1, chk.name)
        report = run_check(chk, pair, examples=examples, seed=seed)
        reports.append(report)
        progress.log(f"[{i:>2}/{len(checks)}] {chk.name:<26} "
                     f"{'ok' if report.ok else 'DISAGREE'}  ({report.examples} examples, "
                     f"{time.perf_counter() - t0:.1f} s)")
    lock = {}
    if not only:
        progress.show(len(checks), LOCKSTEP_TITLE)
        lock = _lockstep_runs(LOCKSTEP_STEPS)
        progress.log(f"{LOCKSTEP_TITLE} ... "
                     f"{'ok' if all(r.ok for r in lock.values()) else 'DIVERGED'}")
    progress.close()
    result = _report(info, examples, seed, reports, lock, time.perf_counter() - started)
    _print_tables(result, out)
    return result


def _report(info, examples, seed, reports, lock, seconds) -> dict:
    entries = {}
    for report in reports:
        for key, stats in report.entries.items():
            entries.setdefault(key, EntryStats(key)).merge(stats)
    failures = {r.name: r.failure for r in reports if not r.ok}
    lockstep_rows = {name: {"steps": len(r.steps) - 1,
                            "max_divergence": _finite_or_text(r.max_divergence),
                            "bound": LOCKSTEP_TOLERANCE, "ok": r.ok, "message": r.message}
                     for name, r in lock.items()}
    ok = not failures and all(r["ok"] for r in lockstep_rows.values())
    return {"ok": ok, "dualgrad": __version__, "python": platform.python_version(),
            "device": {k: info[k] for k in ("name", "type", "api_version", "driver",
                                             "preserves_nan", "preserves_denormals",
                                             "tensor_cores")
                       if k in info},
            "examples_per_check": examples, "seed": seed, "derandomized": seed is None,
            "seconds": round(seconds, 1),
            "entries": {k: v.as_dict() for k, v in sorted(entries.items())},
            "failures": failures, "lockstep": lockstep_rows}


def _finite_or_text(value: float):
    return value if math.isfinite(value) else str(value)     # JSON has no inf


def _figure(ratio: float) -> str:
    """A worst-error-to-bound ratio: three decimals where it matters, else 3 digits."""
    return f"{ratio:.3f}" if ratio < 1000 else f"{ratio:.3g}"


def _print_tables(result: dict, out) -> None:
    print(f"\n{'op':<34} {'cases':>6} {'max |err|':>10} {'max rel':>9} {'max ULP':>8} "
          f"{'of bound':>8}  {'':4}  bound", file=out)
    for key, e in result["entries"].items():
        print(f"{key:<34} {e['cases']:>6} {float(e['max_abs']):>10.3g} "
              f"{float(e['max_rel']):>9.3g} {float(e['max_ulp']):>8.0f} "
              f"{_figure(float(e['worst'])):>8}  {'ok' if e['ok'] else 'FAIL':4}  {e['bound']}",
              file=out)
    for name, r in result["lockstep"].items():
        print(f"{'lockstep:' + name:<34} {r['steps']:>6} {'':>10} "
              f"{float(r['max_divergence']):>9.3g} {'':>8} "
              f"{_figure(float(r['max_divergence']) / r['bound']):>8}  "
              f"{'ok' if r['ok'] else 'FAIL':4}  {r['bound']:g} (2-norm, relative)", file=out)
    print(f"\n{LEGEND}", file=out)
    print("\nworst input per op (the example of the largest 'of bound'):", file=out)
    for key, e in result["entries"].items():
        print(f"  {key:<32} {e['worst_input']}", file=out)
    for name, text in result["failures"].items():
        print(f"\n{name} disagrees:\n  " + text.replace("\n", "\n  "), file=out)
    for name, r in result["lockstep"].items():
        if not r["ok"]:
            print(f"\nlockstep:{name}: {r['message']}", file=out)
    n_bad = sum(not e["ok"] for e in result["entries"].values()) + sum(
        not r["ok"] for r in result["lockstep"].values())
    print(f"\n{'all agree' if result['ok'] else f'{n_bad} disagreement(s)'} "
          f"({len(result['entries'])} ops, {result['seconds']} s)", file=out)


def write_report(result: dict, path: str) -> None:
    """Write the report as JSON to ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, sort_keys=True)
        f.write("\n")
