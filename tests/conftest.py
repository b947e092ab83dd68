"""Fixtures shared by the plugin's tests."""

from __future__ import annotations

import tempfile

import pytest


@pytest.fixture
def private_device_lock(tmp_path, monkeypatch):
    """Other sessions on this machine hold the shared device lock (in the temporary folder); a
    test's own sessions use their own."""
    lockdir = tmp_path / "locks"
    lockdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(lockdir))
    monkeypatch.setattr(tempfile, "tempdir", str(lockdir))
