"""Peak memory of a benchmark's measured rounds, on every device.

- GPU and TPU: the device allocator's peak (``tf.config.experimental.get_memory_info``), reset
  with ``reset_memory_stats`` just before the first measured round.
- CPU: TensorFlow's CPU allocator keeps no statistics, so the figure is the process's peak
  resident set. Linux resets the high-water mark (``VmHWM``) to the current RSS when "5" is
  written to ``/proc/self/clear_refs``; the peak is ``VmHWM`` read after the rounds.

Both sources also give the growth of that peak over what was in use before the benchmark's
first call through the fixture (``increase``, marked with ``mark``): what the calls allocate,
without the model, the dataset and the interpreter that were resident before. An allocation 20%
larger shows there as 20% more; in the absolute peak it is diluted by everything else. On the
CPU, memory that the process's allocator reuses without asking the kernel for more does not
show as an increase, however often the benchmark allocates it.

Imports TensorFlow only when an allocator is read, and then only if a test already loaded it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")
RESET_HIGH_WATER_MARK = "5"  # see proc(5), /proc/pid/clear_refs


@dataclass(frozen=True)
class PeakMemory:
    """The peak of one measurement, in bytes, and where it came from."""

    peak: int
    increase: int  # peak minus what was in use before the first call (see ``mark``)
    source: str  # "allocator" | "rss"

    def extra_info(self) -> dict[str, object]:
        return {
            "peak_memory_bytes": self.peak,
            "peak_memory_increase_bytes": self.increase,
            "peak_memory_source": self.source,
        }


def _status_kib(field: str, status: str) -> int | None:
    match = re.search(rf"^{field}:\s+(\d+)\s+kB", status, re.MULTILINE)
    return int(match.group(1)) if match else None


def _read_status() -> str:
    try:
        return STATUS.read_text()
    except OSError:
        return ""


def _rss() -> int | None:
    kib = _status_kib("VmRSS", _read_status())
    return kib * 1024 if kib is not None else None


class RssPeak:
    """The process's peak resident memory since ``start`` (Linux; None elsewhere)."""

    def __init__(self) -> None:
        self.start_rss: int | None = None
        self.resettable = False

    def mark(self) -> None:
        self.start_rss = _rss()

    def start(self) -> None:
        try:
            CLEAR_REFS.write_text(RESET_HIGH_WATER_MARK)
            self.resettable = True
        except OSError:  # not Linux, or a kernel that forbids it: no honest peak for the rounds
            self.resettable = False
        if self.start_rss is None:
            self.mark()

    def stop(self) -> PeakMemory | None:
        status = _read_status()
        hwm = _status_kib("VmHWM", status)
        if not self.resettable or hwm is None or self.start_rss is None:
            return None
        peak = hwm * 1024
        return PeakMemory(peak, max(0, peak - self.start_rss), "rss")


class AllocatorPeak:
    """The device allocator's peak on ``device`` since ``start`` (GPU, TPU)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.start_current: int | None = None

    def _info(self) -> dict[str, int] | None:
        if "tensorflow" not in sys.modules:  # never import TensorFlow just to measure
            return None
        import tensorflow as tf

        try:
            info = tf.config.experimental.get_memory_info(self.device)
        except (ValueError, RuntimeError):
            return None
        return {"current": int(info["current"]), "peak": int(info["peak"])}

    def mark(self) -> None:
        info = self._info()
        self.start_current = info["current"] if info else None

    def start(self) -> None:
        if "tensorflow" not in sys.modules:
            return
        import tensorflow as tf

        try:
            tf.config.experimental.reset_memory_stats(self.device)
        except (ValueError, RuntimeError):
            return
        if self.start_current is None:
            self.mark()

    def stop(self) -> PeakMemory | None:
        info = self._info()
        if info is None or self.start_current is None:
            return None
        return PeakMemory(info["peak"], max(0, info["peak"] - self.start_current), "allocator")


def tracker(kind: str, device: str | None) -> RssPeak | AllocatorPeak:
    """The right measurement for a device of ``kind`` (the CPU has no allocator statistics)."""
    if kind == "cpu" or not device:
        return RssPeak()
    return AllocatorPeak(device)
