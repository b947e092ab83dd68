"""Both processes of a same-job comparison on one hash seed.

Python salts the hashes of ``str`` and ``bytes`` with a seed drawn per process unless
``PYTHONHASHSEED`` fixes it, so two processes running the same code lay out their dicts and sets
differently, and code that lives on them runs at different speeds for the whole process: an
offset between base and head that no pairing of rounds divides out. (Measured here, six A/A
same-job sessions each: a 50 µs tokenizer of dicts and sets read changes with a spread of 2.4 %
between sessions where each side drew its own seed and 0.6 % on one seed, its
``benchmark.pedantic`` twin 2.9 % and 1.2 %; a numpy function and a dict loop of ints did not
care. Alone, in processes started one after another, the seed made no difference that showed:
the offset comes from the seed and from what else differs between two processes together.)

So a ``--compare-ref`` session whose hash seed is random starts itself again, once, with a seed
drawn now in ``PYTHONHASHSEED`` (``os.execve`` of its own command line, before any conftest is
imported), and its base inherits it with the rest of the environment. Each new pair of
processes that measures a row again gets a seed of its own, the same on both of its sides, so the
spread between pairs still shows what the seed does to a change. A seed the user set is kept.
Where the session cannot start itself again (``pytest.main()`` called from a program of the
user's, or a platform without ``exec``) the seeds differ and the header says so. The same start
again gives both sides the BLAS spin limit of ``sameref.spin``.
"""

from __future__ import annotations

import os
import random
import sys

import pytest

from pytest_tpu.sameref import spin

SEED_ENV = "PYTHONHASHSEED"
OURS_ENV = "PYTEST_TPU_REF_SEEDED"  # set beside a seed this plugin chose, not the user
_HIGHEST = 4_294_967_295  # the largest seed Python accepts


def fixed() -> int | None:
    """The hash seed this process runs with, or None where it was drawn at random."""
    value = os.environ.get(SEED_ENV, "")
    return int(value) if value.isdigit() and int(value) <= _HIGHEST else None


def fresh() -> str:
    """A new seed for a new pair of processes."""
    return str(random.SystemRandom().randint(1, _HIGHEST))


def _own_command(config: pytest.Config) -> bool:
    """Whether this process is pytest started from a command line with these arguments, so
    running that command line again runs this session again (not ``pytest.main()`` called by a
    program that would run again too, or by pytester inside another session)."""
    orig = getattr(sys, "orig_argv", None)
    return bool(orig) and tuple(sys.argv[1:]) == tuple(config.invocation_params.args)


def start_again_aligned(config: pytest.Config) -> None:
    """Start this session again with a fixed hash seed and the BLAS spin limit
    (``sameref.spin``), where it lacks either and can; returns only where it does not."""
    # A seed of the user's ("random" too) is theirs to choose.
    added = {} if os.environ.get(SEED_ENV) else {SEED_ENV: fresh(), OURS_ENV: "1"}
    added |= spin.missing()
    if not added or os.name != "posix" or not _own_command(config):
        return
    env = {**os.environ, **added}
    # pytest captures file descriptors 1 and 2 from here on (its capture plugin wraps this
    # hook): given back first, or the new session writes into the capture's temporary file.
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    except OSError:
        return  # the seeds differ; the header says so


def for_new_pair() -> dict[str, str]:
    """The environment a new pair of processes adds: a seed of its own, unless the user chose
    one (a number, or ``random``)."""
    if os.environ.get(SEED_ENV) and not os.environ.get(OURS_ENV):
        return {}
    return {SEED_ENV: fresh(), OURS_ENV: "1"}


def describe() -> str:
    """The header's words on the two processes' hash seeds."""
    seed = fixed()
    if seed is not None:
        return f"hash seed {seed} on both sides"
    why = "PYTHONHASHSEED=" + os.environ[SEED_ENV] if os.environ.get(SEED_ENV) else "no seed set"
    return f"hash seeds differ between the two processes ({why}): set PYTHONHASHSEED to align them"
