#!/usr/bin/env bash
# Prints the Python the make targets use. Inside a virtual environment, its python; else
# .venv/bin/python, making .venv first: Debian's and Ubuntu's own Python refuse to install
# packages outside one (externally-managed-environment). Where the venv module is missing
# (Debian's python3-venv), it is installed with apt-get, as root or through sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
if python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  command -v python3
  exit 0
fi
venv=${DUALGRAD_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    if command -v apt-get >/dev/null 2>&1; then
      sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
      ver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
      echo "python-env: installing Python's venv module (apt-get)" >&2
      $sudo apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        "python$ver-venv" >&2 || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
        --no-install-recommends python3-venv >&2
    fi
    python3 -m venv "$venv" >&2
  fi
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  echo "python-env: made the virtual environment $venv (activate it with: . $venv/bin/activate)" >&2
fi
echo "$PWD/$venv/bin/python"
