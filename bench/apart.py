"""bench_cpu.py with each side in processes of its own: ours alone, then the peer alone
(PyTorch, NumPy), alternating, so that neither side's idle threads (OpenBLAS's and
OpenMP's spin for a while after their work) slow the other; the figures are the medians
over the processes, with their ranges.

    python3 bench/apart.py --pairs 2 -- --sections train,cnn,gpt --repeats 6 --rounds 3

The arguments after ``--`` go to bench_cpu.py. The peer's processes leave the C library's
heap as it is (DUALGRAD_CPU_KEEP_MEMORY=0): PyTorch is timed as it runs without dualgrad.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def run_side(side: str, bench_args: list) -> list:
    """bench_cpu.py's rows from one process timing ``side`` alone."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "rows.json"
        env = dict(os.environ)
        if side == "peer":
            env["DUALGRAD_CPU_KEEP_MEMORY"] = "0"
        done = subprocess.run([sys.executable, str(HERE / "bench_cpu.py"), *bench_args,
                               "--side", side, "--json", str(out)], env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench_cpu.py --side {side} failed:\n{done.stderr}")
        return json.loads(out.read_text())


def spread(values: list) -> str:
    values = [v for v in values if v]
    if not values:
        return "n/a"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid * 1e3:.3f} ms ({low * 1e3:.3f}-{high * 1e3:.3f})"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours_args, bench_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) \
        if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2,
                        help="processes of each side, alternating (default %(default)s)")
    args = parser.parse_args(ours_args)
    times: dict = {}                  # case -> {"ours": [...], "peer": [...], "target"}
    for _ in range(args.pairs):
        for side in ("ours", "peer"):
            for row in run_side(side, bench_args):
                case = times.setdefault(row["case"], {"ours": [], "peer": [],
                                                      "target": row["target"]})
                case[side].append(row[side])
    print(f"{'case':<44} {'ours':>26} {'peer':>26} {'ratio':>6}  target")
    for name, case in times.items():
        ours = [v for v in case["ours"] if v]
        peer = [v for v in case["peer"] if v]
        ratio = (f"{statistics.median(ours) / statistics.median(peer):6.3f}"
                 if ours and peer else "   n/a")
        print(f"{name:<44} {spread(ours):>26} {spread(peer):>26} {ratio}  "
              f"{case['target'] or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
