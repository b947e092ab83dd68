"""Vendor peak dense throughput of known accelerators, for "percent of peak" figures.

Figures are the vendors' published dense (non-sparse) peaks in FLOP/s, for the fastest
matrix datatype of the part (bf16/fp16 on tensor cores or the MXU) and for float32.
Unknown parts give ``None``: a guessed peak would make every percentage wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

TERA = 1e12


@dataclass(frozen=True)
class Peak:
    """Peak FLOP/s of one chip (GPU) or one TPU chip."""

    matrix: float  # bf16/fp16 dense
    float32: float


# Matched as substrings of the device name TensorFlow reports, most specific first.
GPU_PEAKS: tuple[tuple[str, Peak], ...] = (
    ("H200", Peak(989 * TERA, 67 * TERA)),
    ("H100 PCIe", Peak(756 * TERA, 51 * TERA)),
    ("H100", Peak(989 * TERA, 67 * TERA)),
    ("A100", Peak(312 * TERA, 19.5 * TERA)),
    ("L4", Peak(121 * TERA, 30.3 * TERA)),
    ("A10G", Peak(70 * TERA, 31.2 * TERA)),
    ("V100", Peak(125 * TERA, 15.7 * TERA)),
    ("T4", Peak(65 * TERA, 8.1 * TERA)),
    ("P100", Peak(18.7 * TERA, 9.3 * TERA)),
    ("K80", Peak(4.37 * TERA, 4.37 * TERA)),
)

# Per chip, keyed by the generation in accelerator types such as "v3-8". The float32 figure
# equals the bf16 one because TensorFlow's default matmul precision on TPU feeds float32
# operands to the MXU as bfloat16 in one pass.
TPU_PEAKS: dict[str, Peak] = {
    "v2": Peak(45 * TERA, 45 * TERA),
    "v3": Peak(123 * TERA, 123 * TERA),
    "v4": Peak(275 * TERA, 275 * TERA),
    "v5litepod": Peak(197 * TERA, 197 * TERA),
    "v5e": Peak(197 * TERA, 197 * TERA),
    "v5p": Peak(459 * TERA, 459 * TERA),
    "v6e": Peak(918 * TERA, 918 * TERA),
}

# TensorCores per chip: TensorFlow shows one replica per core on v2/v3, one per chip after.
TPU_CORES_PER_CHIP: dict[str, int] = {"v2": 2, "v3": 2}


def gpu_peak(name: str) -> Peak | None:
    """Peak of the GPU model named ``name`` (as TensorFlow reports it), if known."""
    for key, peak in GPU_PEAKS:
        if key in name:
            return peak
    return None


def tpu_peak(accelerator_type: str, replicas: int) -> Peak | None:
    """Peak of a TPU slice such as ``v3-8`` with ``replicas`` cores visible."""
    generation = accelerator_type.split("-", 1)[0].lower()
    peak = TPU_PEAKS.get(generation)
    if peak is None or replicas < 1:
        return None
    chips = max(1, replicas // TPU_CORES_PER_CHIP.get(generation, 1))
    return Peak(peak.matrix * chips, peak.float32 * chips)
