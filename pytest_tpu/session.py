"""Per-session device state: the inventory (found lazily, once) and one strategy per device.

Nothing here runs at collection: tests are parametrized from the kinds ``--accelerator`` names,
and devices are discovered the first time a fixture needs one.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_tpu.options import Settings

if TYPE_CHECKING:
    from pytest_tpu.accelerator import Accelerator
    from pytest_tpu.devices import Inventory


@dataclass
class DeviceSession:
    """Everything the fixtures share; lives on ``config.stash`` for one session."""

    settings: Settings
    worker: bool = False  # a pytest-xdist worker: other processes of the run share the devices
    _inventory: Inventory | None = None
    _strategies: dict[str, Any] = field(default_factory=dict)

    @property
    def discovered(self) -> bool:
        return self._inventory is not None

    def inventory(self) -> Inventory:
        """Discover devices the first time they are needed, then reuse the answer.

        A kind named explicitly in ``--accelerator`` but missing ends the session as a usage
        error (exit 4). The header finds it first (``usage_problem``) wherever a selected test
        uses a device; this exit is for a device fixture requested dynamically, which pytest
        reports with its ``Exit`` prefix. Collection never probes.
        """
        from pytest_tpu.devices import ThreadsError

        try:
            found = self.discover()
        except ThreadsError as exc:
            pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
        problem = self.usage_problem()
        if problem:
            pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)
        return found

    def discover(self) -> Inventory:
        """The devices present, found once (a missing explicit kind is not checked here)."""
        if self._inventory is None:
            from pytest_tpu.devices import discover

            settings = self.settings
            self._inventory = discover(
                settings.virtual_cpus, settings.tpu_timeout, settings.tpu_threads, self.worker
            )
        return self._inventory

    def usage_problem(self) -> str | None:
        """Why the session cannot run as asked: a kind ``--accelerator`` names is missing."""
        missing = self.missing_explicit()
        return not_present(missing) if missing else None

    def accelerator(self, kind: str) -> Accelerator:
        """The device of ``kind``; skips the test with the reason when it is missing."""
        from pytest_tpu.accelerator import Accelerator

        inventory = self.inventory()
        if kind not in inventory.devices:
            pytest.skip(inventory.missing.get(kind, f"no {kind.upper()} found"))
        return Accelerator(inventory.devices[kind])

    def first_present(self) -> str:
        """The first selected kind that is present (``cpu`` when none is)."""
        devices = self.inventory().devices
        return next((kind for kind in self.settings.accelerator.kinds if kind in devices), "cpu")

    def strategy(self, accelerator: Accelerator) -> Any:
        """One strategy per device per session: strategies own replica state and threads."""
        if accelerator.kind not in self._strategies:
            from pytest_tpu.strategy import make_strategy

            resolver = self.inventory().tpu_resolver
            self._strategies[accelerator.kind] = make_strategy(accelerator.device, resolver)
        return self._strategies[accelerator.kind]

    def kinds_for(self, wanted: tuple[str, ...]) -> list[str]:
        """The kinds a test is parametrized over: those ``--accelerator`` selects among
        ``wanted``. Decided from the options and the device files alone, so collection
        imports no TensorFlow and touches no device.

        ``auto`` keeps the kinds whose device files or variables are there (a CPU-only machine
        gets no GPU and TPU skips); when none of the wanted kinds is, they all stay, to be
        skipped at setup with the reason.
        """
        chosen = [kind for kind in self.settings.accelerator.kinds if kind in wanted]
        if self.settings.accelerator.mode != "auto":
            return chosen
        return [kind for kind in chosen if looks_present(kind)] or chosen

    def missing_explicit(self) -> list[str]:
        """Kinds named explicitly in --accelerator that are not present, with reasons."""
        if self._inventory is None or self.settings.accelerator.mode != "explicit":
            return []
        return [
            f"{kind}: {self._inventory.missing[kind]}"
            for kind in self.settings.accelerator.kinds
            if kind in self._inventory.missing
        ]


session_key = pytest.StashKey[DeviceSession]()


def not_present(missing: list[str]) -> str:
    """The usage error for kinds named explicitly that are missing (``kind: reason`` each)."""
    return "--accelerator asked for devices that are not present: " + "; ".join(missing)


# What a machine with such a device shows without any library loaded: its device files (NVIDIA's
# driver, AMD's ROCm, a TPU VM's accelerators) or the variables that name a remote TPU.
_DEVICE_FILES = {
    "gpu": ("/dev/nvidia[0-9]*", "/dev/kfd"),
    "tpu": ("/dev/accel*", "/dev/vfio/[0-9]*"),
}
_DEVICE_ENV = {"tpu": ("TPU_NAME", "COLAB_TPU_ADDR", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS")}


def looks_present(kind: str) -> bool:
    """Whether a device of ``kind`` may be here (discovery at setup has the last word)."""
    if kind == "cpu":
        return True
    if any(os.environ.get(name) for name in _DEVICE_ENV.get(kind, ())):
        return True
    return any(glob.glob(pattern) for pattern in _DEVICE_FILES.get(kind, ()))


# Set once the devices line (with the reasons for missing devices) was in the header, so the
# summary does not repeat it.
header_shown_key = pytest.StashKey[bool]()
