"""Model FLOPs, the CPU's peak and utilisation: how much of the device a benchmark uses.

- ``count_flops(fn_or_model, *example_args)`` counts the floating-point operations of one call
  with TensorFlow's graph profiler (``tf.compat.v1.profiler`` with the ``float_operation``
  options, on the graph of the function's concrete function): matrix products, convolutions and
  the element-wise ops TensorFlow registers statistics for. A loop in the graph (``tf.range``,
  ``tf.while_loop``, a Keras RNN) is counted once, not once per iteration, so such graphs are
  refused rather than undercounted; count one iteration, or use an analytic count such as
  ``lstm_train_flops``.
- ``cpu_peak()`` is the CPU's peak float32 FLOP/s from what the processor reports: the vector
  width and FMA flags, the cores this process may use and the clock. The figure is an upper
  bound (it assumes two FMA units per core, the most any x86 core has), so a result above it
  is impossible, not merely good: that is what ``utilisation`` flags.

Model FLOPs of a training step follow the usual convention (PaLM's MFU): three times the
forward pass (the backward pass costs about twice the forward), optimizer and element-wise
work left out. Nothing here imports TensorFlow at module level.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

TERA = 1e12
TRAIN_FACTOR = 3.0  # forward + backward (about twice the forward)
MAX_FMA_UNITS = 2  # per core, the most any x86 core has
# float32 lanes per vector instruction, by the widest vector extension the CPU reports
LANES = (("avx512f", 16), ("avx2", 8), ("avx", 8), ("sse2", 4))
LOOP_OPS = {"While", "StatelessWhile"}


@dataclass(frozen=True)
class CpuPeak:
    """Peak float32 FLOP/s of the cores this process may use, and how it was derived."""

    flops: float
    source: str  # "cpuinfo: 2 cores x 2.60 GHz x 64 FLOP/cycle (avx512f, fma)"
    bfloat16_factor: float = 1.0  # 2 where the CPU has bfloat16 dot-product instructions


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return info.read()
    except OSError:
        return ""


def flops_per_cycle(flags: set[str]) -> int:
    """FP32 FLOP per cycle per core: lanes x 2 (an FMA is two) x FMA units (1 without FMA)."""
    lanes = next((n for flag, n in LANES if flag in flags), 1)
    fma = "fma" in flags or "avx512f" in flags
    return lanes * 2 * MAX_FMA_UNITS if fma else lanes * 2


def cpu_peak(cpuinfo: str | None = None, cores: int | None = None) -> CpuPeak | None:
    """The CPU's peak from ``/proc/cpuinfo`` (None where it says too little, e.g. not Linux)."""
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    flags_line = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    clock = _max_clock_mhz() or _cpuinfo_mhz(text)
    if flags_line is None or clock is None:
        return None
    flags = set(flags_line.group(1).split())
    per_cycle = flops_per_cycle(flags)
    count = cores or len(os.sched_getaffinity(0))
    widest = next((flag for flag, _ in LANES if flag in flags), "scalar")
    source = (
        f"cpuinfo: {count} cores x {clock / 1000:.2f} GHz x {per_cycle} FLOP/cycle "
        f"({widest}{', fma' if 'fma' in flags else ''})"
    )
    bf16 = 2.0 if {"avx512_bf16", "amx_bf16"} & flags else 1.0
    return CpuPeak(count * clock * 1e6 * per_cycle, source, bf16)


def _cpuinfo_mhz(text: str) -> float | None:
    found = re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, re.MULTILINE)
    return max(float(mhz) for mhz in found) if found else None


def _max_clock_mhz() -> float | None:
    """The highest clock the kernel allows (turbo included); absent in most VMs."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", encoding="utf-8") as f:
            return int(f.read().strip()) / 1000
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Utilisation:
    """Achieved throughput against the device's peak, or why it is not reported."""

    flops_per_step: float
    achieved_tflops: float | None
    pct_peak: float | None
    peak_tflops: float | None
    peak_source: str | None
    warning: str | None = None

    def extra_info(self) -> dict[str, object]:
        info: dict[str, object] = {
            "flops_per_step": self.flops_per_step,
            "achieved_tflops": self.achieved_tflops,
            "pct_peak": self.pct_peak,
            "peak_tflops": self.peak_tflops,
            "peak_source": self.peak_source,
        }
        if self.warning:
            info["flops_warning"] = self.warning
        return info


def utilisation(
    flops_per_step: float, seconds_per_step: float, peak: float | None, peak_source: str | None
) -> Utilisation:
    """TFLOP/s and % of peak of a step; above the peak, neither is reported (a step cannot
    beat the hardware: its timing most likely ended before the device finished)."""
    achieved = flops_per_step / seconds_per_step if seconds_per_step > 0 else None
    peak_tflops = peak / TERA if peak else None
    if achieved is None:
        return Utilisation(flops_per_step, None, None, peak_tflops, peak_source, "no step time")
    if peak and achieved > peak:
        warning = (
            f"impossible: {achieved / TERA:.3g} TFLOP/s is above the peak of "
            f"{peak / TERA:.3g} TFLOP/s ({peak_source}); the timing most likely missed a "
            "device sync"
        )
        return Utilisation(flops_per_step, None, None, peak_tflops, peak_source, warning)
    pct = 100.0 * achieved / peak if peak else None
    return Utilisation(flops_per_step, achieved / TERA, pct, peak_tflops, peak_source)


def device_utilisation(
    flops_per_step: float, seconds_per_step: float, accelerator: Any, dtype: str = "float32"
) -> Utilisation:
    """``utilisation`` against the peak of the ``accelerator`` fixture's device for ``dtype``
    (the vendor's figure on GPUs and TPUs, ``cpu_peak`` on the CPU)."""
    peak = accelerator.peak_flops_for(dtype)
    return utilisation(flops_per_step, seconds_per_step, peak, accelerator.peak_source)


def _as_function(tf: Any, fn_or_model: Any) -> Any:
    if hasattr(fn_or_model, "get_concrete_function"):
        return fn_or_model  # already a tf.function
    if hasattr(fn_or_model, "trainable_variables") and callable(fn_or_model):
        return tf.function(lambda *args: fn_or_model(*args, training=False))  # a Keras model
    return tf.function(fn_or_model)


def _op_types(graph: Any) -> set[str]:
    """Op types of ``graph`` and of every function in its library (loop bodies live there)."""
    types = {op.type for op in graph.get_operations()}
    library = graph.as_graph_def().library
    types.update(node.op for function in library.function for node in function.node_def)
    return types


def count_flops(fn_or_model: Any, *example_args: Any) -> float:
    """FLOPs of one call of a ``tf.function``, plain function or Keras model (forward pass,
    ``training=False``) on ``example_args``. Raises ``ValueError`` for graphs with loops,
    which the graph profiler would count once."""
    import tensorflow as tf
    from tensorflow.python.profiler import model_analyzer, option_builder

    concrete = _as_function(tf, fn_or_model).get_concrete_function(*example_args)
    loops = _op_types(concrete.graph) & LOOP_OPS
    if loops:
        raise ValueError(
            f"the graph has a loop ({', '.join(sorted(loops))}), which TensorFlow's graph "
            "profiler counts once rather than per iteration; count one iteration instead"
        )
    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    profile = model_analyzer.profile(concrete.graph, options=options)
    return float(profile.total_float_ops)


def train_step_flops(model: Any, *example_args: Any) -> float:
    """Model FLOPs of one training step: three forward passes (see the module's docstring)."""
    return TRAIN_FACTOR * count_flops(model, *example_args)


def lstm_train_flops(batch: int, steps: int, features: int, units: int) -> float:
    """Model FLOPs of one training step of an LSTM layer: four gates, each a product of
    ``[x, h]`` (``features + units``) with ``units`` outputs, per time step and sample."""
    forward = 2.0 * 4 * units * (features + units) * steps * batch
    return TRAIN_FACTOR * forward
