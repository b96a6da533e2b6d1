"""Run every benchmark script in this folder (bench_*.py), passing the arguments on."""
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main() -> int:
    status = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        status |= subprocess.call([sys.executable, str(script), *sys.argv[1:]])
    return status


if __name__ == "__main__":
    sys.exit(main())
