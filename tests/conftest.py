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


@pytest.fixture(scope="session")
def tensorflow_in_process():
    """TensorFlow, imported into this process once and before any test's pytester snapshot.

    A test that runs device sessions in process (``pytester.runpytest``) saves a TensorFlow
    import (about 5 s) per session, but pytester removes at teardown what a test imported, and
    TensorFlow cannot be imported twice into one process: a session fixture is set up before
    the function-scoped ``pytester`` takes its snapshot.
    """
    import tensorflow as tf

    return tf
