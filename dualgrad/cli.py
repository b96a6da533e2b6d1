"""The dualgrad command line: info, demo, verify."""
from __future__ import annotations

import argparse
import platform
import sys


def _info(args) -> int:
    import numba
    import numpy

    import dualgrad as dg
    print(f"dualgrad {dg.__version__}  (Python {platform.python_version()}, "
          f"NumPy {numpy.__version__}, Numba {numba.__version__})")
    print("backends: cpu (Numba, the reference), gpu (Vulkan)")
    from .api.device import gpu_status
    found, reason = gpu_status()
    if not found:
        print(f"Vulkan devices: none ({reason})")
        return 0
    print("Vulkan devices:")
    for d in found:
        ieee = ", ".join(name for name, key in (("NaN/inf/-0 preserved", "preserves_nan"),
                                                ("subnormals preserved", "preserves_denormals"),
                                                ("bf16 tensor cores", "tensor_cores"))
                         if d.get(key)) or "no float controls"
        usable = "" if d["usable"] else "  [not usable: needs Vulkan 1.2 + buffer addresses]"
        print(f"  [{d['index']}] {d['name']}  ({d['type']}, {d['memory_mib']} MiB, "
              f"Vulkan {d['api_version']}, driver {d['driver']}; {ieee}){usable}")
    return 0


def _demo(args) -> int:
    from .demo import run_demo
    from .errors import DualgradError
    try:
        run_demo(device=args.device, steps=args.steps, batch=args.batch, hidden=args.hidden,
                 seed=args.seed)
    except DualgradError as exc:
        print(f"dualgrad demo: {exc}", file=sys.stderr)
        return 2
    return 0


def _verify(args) -> int:
    from .errors import DualgradError
    from .verify import verify, write_report
    name = "gpu" if args.device is None else f"gpu:{args.device}"
    try:
        result = verify(name, examples=args.examples, seed=args.seed, only=args.only)
    except DualgradError as exc:
        print(f"dualgrad verify: {str(exc).removeprefix('verify: ')}", file=sys.stderr)
        return 2
    if args.report:
        write_report(result, args.report)
        print(f"report written to {args.report}")
    return 0 if result["ok"] else 1


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _index(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a device index (0, 1, ...), got {text}")
    return int(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="dualgrad", description="dualgrad: one autograd API on a Numba cpu backend and "
        "a Vulkan gpu backend. 'dualgrad verify' checks this machine's Vulkan device against "
        "the cpu reference.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, backends and Vulkan devices").set_defaults(run=_info)
    demo = sub.add_parser("demo", help="train a small digit classifier")
    demo.add_argument("--device", default="cpu", help="cpu (default), gpu or gpu:N")
    demo.add_argument("--steps", type=_positive, default=500)
    demo.add_argument("--batch", type=_positive, default=128)
    demo.add_argument("--hidden", type=_positive, default=128)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(run=_demo)
    check = sub.add_parser("verify", help="check this machine's Vulkan device against the cpu "
                           "reference (exit status 1 on any disagreement)")
    check.add_argument("--device", type=_index, default=None,
                       help="Vulkan device index (see 'dualgrad info'; default: the best)")
    check.add_argument("--examples", type=_positive, default=25,
                       help="examples per check (default 25)")
    check.add_argument("--report", metavar="FILE", help="also write the results as JSON")
    check.add_argument("--seed", type=int, default=None,
                       help="draw different examples (default: the same every run)")
    check.add_argument("--only", metavar="TEXT", help="run only checks whose name contains "
                       "TEXT (and skip the lockstep models)")
    check.set_defaults(run=_verify)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
