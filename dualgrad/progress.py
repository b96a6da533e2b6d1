"""A one-line progress display for long commands (demo, verify, examples).

On a terminal the line is redrawn in place ("verify [12/78] matmul 3.1 s"); anywhere else
(a log file, a pipe, a test's captured output) it stays quiet, and only the lines passed to
``log`` are written.
"""
from __future__ import annotations

import sys
import time


class Progress:
    """``show(done, text)`` redraws the line; ``log(line)`` writes a line that stays;
    ``close()`` clears the display."""

    def __init__(self, total: int, label: str, out=None, interval: float = 0.1):
        self.out = out if out is not None else sys.stdout
        isatty = getattr(self.out, "isatty", None)
        self.live = bool(isatty and isatty())
        self.total, self.label, self.interval = total, label, interval
        self.started = time.perf_counter()
        self._drawn_at = -interval
        self._width = 0

    def show(self, done: int, text: str = "") -> None:
        if not self.live:
            return
        now = time.perf_counter()
        if now - self._drawn_at < self.interval and done < self.total:
            return                              # redraw at most every ``interval`` seconds
        self._drawn_at = now
        line = f"{self.label} [{done}/{self.total}] {text}  {now - self.started:.0f} s"
        self._draw(line)

    def log(self, line: str) -> None:
        self._draw("")
        print(line, file=self.out, flush=True)

    def close(self) -> None:
        self._draw("")

    def _draw(self, line: str) -> None:
        if not self.live or (not line and not self._width):
            return
        self.out.write("\r" + line.ljust(self._width) + ("" if line else "\r"))
        self.out.flush()
        self._width = len(line)
