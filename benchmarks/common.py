"""Small pieces the benchmark suite, the sweeps and the other benchmarks share.

A process's peak memory per run (:class:`MemoryProbe`), a one-line terminal progress
bar (:class:`Progress`) and GitHub-flavoured Markdown tables.  This module imports no
other benchmark module, so every one of them can use it.
"""

from __future__ import annotations

import ctypes
import gc
import resource
import sys
import time
from collections.abc import Sequence
from typing import TextIO

# --------------------------------------------------------------------------- memory


def _load_libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018 - glibc only: fail here, not in reset()
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _load_libc()


class MemoryProbe:
    """Peak resident memory of this process during one run (see the module docstring)."""

    def __init__(self) -> None:
        self.method = "VmHWM (reset via /proc/self/clear_refs)"
        if not self._reset():
            self.method = "ru_maxrss (process lifetime maximum)"

    @staticmethod
    def _reset() -> bool:
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
                handle.write("5")
            return True
        except OSError:
            return False

    @staticmethod
    def _status_kb(key: str) -> int | None:
        try:
            with open("/proc/self/status", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            return None
        return None

    def reset(self) -> float:
        """Release freed memory, reset the high-water mark; return the current RSS in MB.

        Memory that earlier runs freed stays resident (Python's and glibc's free lists)
        and would be reused without raising the mark, hiding a run's real peak; a full
        garbage collection and glibc's ``malloc_trim(0)`` hand it back to the system
        first, so that the peak minus the RSS before is the run's own peak.
        """
        gc.collect()
        if _LIBC is not None:
            _LIBC.malloc_trim(0)
        self._reset()
        current = self._status_kb("VmRSS")
        if current is None:
            return self._maxrss_mb()
        return current / 1024.0

    def peak(self) -> float:
        """The peak RSS in MB since the last :meth:`reset`."""
        if self.method.startswith("VmHWM"):
            hwm = self._status_kb("VmHWM")
            if hwm is not None:
                return hwm / 1024.0
        return self._maxrss_mb()

    @staticmethod
    def _maxrss_mb() -> float:
        # ru_maxrss is in kilobytes on Linux, bytes on macOS
        scale = 1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


class Progress:
    """A one-line progress bar on a terminal (does nothing when disabled)."""

    def __init__(self, stream: TextIO, total: int, enabled: bool, width: int = 28) -> None:
        self.stream = stream
        self.total = max(1, total)
        self.enabled = enabled
        self.width = width
        self.started = time.perf_counter()
        self._last = 0

    def update(self, done: int, label: str) -> None:
        """Show ``done`` of ``total`` finished, working on ``label``."""
        if not self.enabled:
            return
        filled = int(self.width * done / self.total)
        elapsed = int(time.perf_counter() - self.started)
        text = (f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} "
                f"{elapsed // 60:02d}:{elapsed % 60:02d} {label}")[:120]
        pad = max(0, self._last - len(text))
        self.stream.write(text + " " * pad)
        self.stream.flush()
        self._last = len(text)

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def parse_markdown_table(text: str, first_header: str) -> list[list[str]]:
    """The body rows of the first markdown table whose first header cell is given."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0] == first_header:
            body = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                body.append([c.strip() for c in row.strip().strip("|").split("|")])
            return body
    return []
