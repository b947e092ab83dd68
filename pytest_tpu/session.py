"""Per-session device state: the inventory (found lazily, once) and one strategy per device."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_tpu.accelerator import Accelerator
from pytest_tpu.devices import Inventory, discover
from pytest_tpu.options import Settings


@dataclass
class DeviceSession:
    """Everything the fixtures share; lives on ``config.stash`` for one session."""

    settings: Settings
    _inventory: Inventory | None = None
    _strategies: dict[str, Any] = field(default_factory=dict)

    @property
    def discovered(self) -> bool:
        return self._inventory is not None

    def inventory(self) -> Inventory:
        """Discover devices the first time they are needed, then reuse the answer."""
        if self._inventory is None:
            settings = self.settings
            self._inventory = discover(
                settings.virtual_cpus, settings.tpu_timeout, settings.tpu_threads
            )
        return self._inventory

    def accelerator(self, kind: str) -> Accelerator:
        inventory = self.inventory()
        if kind not in inventory.devices:
            pytest.skip(inventory.missing.get(kind, f"no {kind.upper()} found"))
        return Accelerator(inventory.devices[kind])

    def strategy(self, accelerator: Accelerator) -> Any:
        """One strategy per device per session: strategies own replica state and threads."""
        if accelerator.kind not in self._strategies:
            from pytest_tpu.strategy import make_strategy

            resolver = self.inventory().tpu_resolver
            self._strategies[accelerator.kind] = make_strategy(accelerator.device, resolver)
        return self._strategies[accelerator.kind]

    def kinds_for(self, wanted: tuple[str, ...]) -> list[tuple[str, str | None]]:
        """The kinds a test runs on, each with a skip reason when the device is missing."""
        selection = self.settings.accelerator
        chosen = [kind for kind in selection.kinds if kind in wanted]
        inventory = self.inventory()
        present = [kind for kind in chosen if kind in inventory.devices]
        if selection.mode == "auto" and present:
            return [(kind, None) for kind in present]
        return [(kind, inventory.missing.get(kind)) for kind in chosen]

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
# Set once the devices line (with the reasons for missing devices) was in the header, so the
# summary does not repeat it.
header_shown_key = pytest.StashKey[bool]()
