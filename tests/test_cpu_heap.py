"""The cpu backend keeps freed arrays' memory for the next ones (dualgrad/cpu/heap.py): a
second round of a step's allocations faults no pages in, where glibc's defaults hand the
memory back and fault it in again."""
import json
import os
import subprocess
import sys

import pytest

ROUNDS = """
import json, resource, sys
import numpy as np
import dualgrad as dg
dg.ag_tensor(np.zeros(1, np.float32))              # (the cpu backend, made on first use)
from dualgrad.cpu import heap
sizes = [(k % 7 + 1) << 20 for k in range(24)]      # 1-7 MiB arrays, 96 MiB in all
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    arrays = [np.ones(n // 4, np.float32) for n in sizes]
    del arrays
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"state": heap.keep_freed_memory(), "faults": faults,
                  "pages": sum(sizes) // 4096}))
"""


def run_rounds(**env) -> dict:
    done = subprocess.run([sys.executable, "-c", ROUNDS], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_later_rounds_of_allocations_reuse_the_first_rounds_pages():
    kept = run_rounds(DUALGRAD_CPU_KEEP_MEMORY="1")
    assert kept["state"] == "kept"
    system = run_rounds(DUALGRAD_CPU_KEEP_MEMORY="0")
    assert system["state"] == "off"
    assert max(kept["faults"][1:]) < kept["pages"] // 50, (kept, system)


def test_the_environments_own_malloc_settings_are_left_alone():
    assert run_rounds(MALLOC_TRIM_THRESHOLD_="1048576")["state"] == "environment"


def test_a_bad_setting_names_the_variable(monkeypatch):
    from dualgrad.cpu import heap
    from dualgrad.errors import InvalidValueError
    monkeypatch.setenv("DUALGRAD_CPU_KEEP_MEMORY", "yes")
    with pytest.raises(InvalidValueError, match="DUALGRAD_CPU_KEEP_MEMORY is 'yes'"):
        heap.keep_freed_memory()
