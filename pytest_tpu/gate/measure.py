"""A stored benchmark's change against its saved runs: raw or calibrated, whichever is more certain,
widened by the machine's drift that the calibration may not have divided out."""

from __future__ import annotations

import math

from pytest_tpu.gate.history import RunSummary, noise_logs, sessions
from pytest_tpu.gate.model import MODES, UNTRACKED_DRIFT, Measured, Side
from pytest_tpu.gate.stats import Change, change, sample_sd, widened


def _mode_change(base: Side, current: RunSummary, mode: str, threshold: float) -> Change | None:
    runs = sessions(base.runs) or list(base.runs)
    history = [getattr(run, mode) for run in runs]
    now = getattr(current, mode)
    if now is None or any(part is None for part in history):
        return None
    if mode == "calibrated" and {run.kernel_kind for run in runs} != {current.kernel_kind}:
        return None  # ratios to different kernels are different units
    extra = noise_logs(base.runs, mode)
    if extra and len(runs) == 1:
        extra.append(history[0].log)
    return change(history, now, extra, assumed=threshold)


def measure(base: Side, current: RunSummary, threshold: float) -> Measured | None:
    """Raw and calibrated changes; the calibrated one is used only where it is more certain.

    Calibration divides out the machine's drift only as far as the kernel tracks this
    benchmark; where it does not, its ratios are noisier than the raw rounds and lose.
    ``threshold`` is the least spread between sessions assumed against one saved run.
    """
    machine = machine_change(base, current)
    typical = typical_drift(base, current)
    candidates = [
        (with_drift(found, mode, machine, typical), mode)
        for mode in MODES
        if (found := _mode_change(base, current, mode, threshold)) is not None
    ]
    if not candidates:
        return None
    best, mode = min(candidates, key=lambda pair: (pair[0].se, MODES.index(pair[1])))
    runs = sessions(base.runs)
    saved = tuple(run.others for run in runs)
    return Measured(best, mode, machine, len(runs), saved, current.others)


def typical_drift(base: Side, current: RunSummary) -> float:
    """How much the machine's speed (the kernel) varied across the saved runs (log SD).

    That much drift is already in the between-session noise the history measured; only drift
    beyond it is new to this comparison.
    """
    runs = sessions(base.runs) or list(base.runs)
    logs = [r.kernel.log for r in runs if r.kernel and r.kernel_kind == current.kernel_kind]
    return sample_sd(logs) if len(logs) >= 2 else 0.0


def with_drift(found: Change, mode: str, machine: Change | None, typical: float) -> Change:
    """The change made as uncertain as the part of the machine's drift it may still carry,
    beyond what the saved runs already saw.

    The history's between-session noise was measured while the machine drifted with a spread
    of ``typical``, so it holds a drift variance of ``typical``² already; a session that drifted
    by ``d`` carries ``d``² of it. Only the difference is new. (It used to be the drift beyond
    twice ``typical``, which let a 23-42 % drift through almost whole under a bursty neighbour:
    unchanged numpy rounds then failed at +10-13 %, calibrated.)
    """
    if machine is None or not math.isfinite(machine.estimate):
        return found
    drift = math.log1p(machine.estimate)
    excess = math.sqrt(max(0.0, drift * drift - typical * typical))
    return widened(
        found, excess * UNTRACKED_DRIFT[mode], f"machine drift {machine.estimate:+.1%} allowed for"
    )


def machine_change(base: Side, current: RunSummary) -> Change | None:
    runs = sessions(base.runs) or list(base.runs)
    kernels = [run.kernel for run in runs if run.kernel_kind == current.kernel_kind]
    if current.kernel is None or len(kernels) != len(runs) or not kernels:
        return None
    return change([k for k in kernels if k is not None], current.kernel)
