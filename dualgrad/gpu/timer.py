"""Device time per kernel: timestamps around each dispatch, summed by shader.

``KernelTimer(device)`` as a context manager: while it is entered, each command buffer the
recorder begins writes a timestamp, and each dispatch and each transfer command (copy,
fill, update) another one when it ends; every submission is waited for and its timestamps
read, so a command's time is the gap from the timestamp before it (the previous command's
end, or the command buffer's start). Transfers are charged to rows of their own, "(copy)",
"(fill)" and "(update)": charged to the dispatch after them, an upload of a step's batch
made its first kernel look twice as long. Where no barrier separates two dispatches they
may overlap, and the second is charged only its tail; a command after a barrier is charged
the barrier's wait too. Timing waits for each batch, so the steps it measures run as their
device work alone (host time between batches is not counted). Recorded steps
(``capture_step``) are not timed.

A tool for finding where a step's device time goes (``bench/profile_gpu.py``), not an
always-on counter: each command then costs a timestamp write and each batch a wait.
"""
from __future__ import annotations

import collections

import numpy as np

from ..errors import DeviceError
from .recorder import MAX_BATCH


class KernelTimer:
    def __init__(self, dev, by_spec: bool = False):
        vk, ctx = dev.ctx.vk, dev.ctx
        self.dev, self.vk = dev, vk
        self.period_ns = float(ctx.limits.timestampPeriod)
        if not ctx.limits.timestampComputeAndGraphics or self.period_ns <= 0:
            raise DeviceError(f"{ctx.info['name']}: the device does not time compute work "
                              "(timestampComputeAndGraphics)")
        # A batch's start, its dispatches (at most MAX_BATCH) and up to as many transfers:
        # past those a transfer's time goes to the command after it, as it did untimed.
        self.capacity = 2 * MAX_BATCH + 1
        self._transfers = 0
        self.pool = vk.vkCreateQueryPool(ctx.device, vk.VkQueryPoolCreateInfo(
            queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=self.capacity), None)
        self._results = np.zeros(self.capacity, np.uint64)
        self._commands: list = []         # each timed command of this batch: a dispatch's
                                          # pipeline, or a transfer's row name
        self.seconds = collections.Counter()  # shader name -> device seconds
        self.calls = collections.Counter()
        self._names = {}
        self.by_spec = by_spec            # each specialization of a shader apart

    # -- the recorder's hooks ---------------------------------------------------------------
    def begun(self, lib, cmd) -> None:
        """A command buffer begins: its first timestamp."""
        lib.vkCmdResetQueryPool(cmd, self.pool, 0, self.capacity)
        lib.vkCmdWriteTimestamp(cmd, self.vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.pool, 0)
        self._commands.clear()
        self._transfers = 0

    def dispatched(self, lib, cmd, pipeline) -> None:
        self._stamp(lib, cmd, pipeline)

    def transferred(self, lib, cmd, kind: str) -> None:
        """A transfer command (``kind``: "copy", "fill" or "update") was recorded."""
        if self._transfers < MAX_BATCH:
            self._transfers += 1
            self._stamp(lib, cmd, f"({kind})")

    def _stamp(self, lib, cmd, entry) -> None:
        """The timestamp that ends the command just recorded (``entry``: what it is)."""
        self._commands.append(entry)
        lib.vkCmdWriteTimestamp(cmd, self.vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.pool,
                                len(self._commands))

    def finished(self) -> None:
        """The batch has run: charge each timed command its gap."""
        n = len(self._commands)
        if not n:
            return
        vk = self.vk
        data = vk.ffi.from_buffer(self._results)
        vk.lib.vkGetQueryPoolResults(self.dev.ctx.device, self.pool, 0, n + 1,
                                     8 * (n + 1), data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
        ticks = np.diff(self._results[:n + 1].astype(np.int64))
        for entry, gap in zip(self._commands, ticks):
            name = self._name(entry)
            self.seconds[name] += max(int(gap), 0) * self.period_ns * 1e-9
            self.calls[name] += 1
        self._commands.clear()
        self._transfers = 0

    def _name(self, entry) -> str:
        if isinstance(entry, str):                    # a transfer's row
            return entry
        name = self._names.get(entry)
        if name is None:
            self._names = {p: f"{shader} {spec}" if self.by_spec else shader
                           for (shader, spec), p in self.dev._pipeline_of.items()}
            name = self._names.get(entry, "?")
        return name

    # -- use ---------------------------------------------------------------------------------
    def __enter__(self) -> "KernelTimer":
        rec = self.dev.rec
        with self.dev.lock:
            rec.flush(wait=True)          # (batches begun before are not timed)
            rec.timer = self
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        rec = self.dev.rec
        with self.dev.lock:
            rec.flush(wait=True)
            rec.timer = None
        return False

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def table(self, steps: int = 1) -> str:
        """Each shader's (and transfer kind's) device time a step (of ``steps``), calls
        and share, longest first."""
        total = sum(self.seconds.values()) or 1.0
        lines = [f"  {'shader':<18} {'ms a step':>10} {'calls':>7} {'share':>7}"]
        for name, s in self.seconds.most_common():
            lines.append(f"  {name:<18} {s * 1e3 / steps:>10.3f} "
                         f"{self.calls[name] / steps:>7.1f} {s / total:>7.1%}")
        lines.append(f"  {'all':<18} {total * 1e3 / steps:>10.3f}")
        return "\n".join(lines)

    def close(self) -> None:
        if self.pool is not None:
            self.vk.vkDestroyQueryPool(self.dev.ctx.device, self.pool, None)
            self.pool = None
