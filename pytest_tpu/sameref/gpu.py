"""Both processes of a same-job comparison on one GPU, each taking memory as it needs it.

TensorFlow's GPU allocator takes nearly all of a GPU's memory when it makes its devices, unless
memory growth is on. The two processes of a comparison run beside each other, and the first to
make its devices (at the header's device check, or in a test module that builds a model when it
is imported) would leave the other too little to run. The base has had memory growth from its
start; the head had not (it made its devices with TensorFlow's default and took the memory first).

So a ``--compare-ref`` session sets ``TF_FORCE_GPU_ALLOW_GROWTH=true`` before any conftest is
imported, since TensorFlow reads it when it makes its GPU devices, not when it is imported. The
base and every new pair of processes inherit it. A value the user set otherwise is replaced, on
both sides alike, and the header says so: the two sides must not differ, and neither may take all
the memory. (No GPU here: read only as far as the environment each process ran with.)
"""

from __future__ import annotations

import os

from pytest_tpu.devices import GPU_GROWTH_ENV

GROWTH = "true"
# The user's own value, where it was not "true": kept for the header across the session's start
# again on a fixed hash seed (``seed``), which runs the process anew with this environment.
REPLACED_ENV = "PYTEST_TPU_REF_GROWTH_REPLACED"


def share() -> None:
    """Turn memory growth on in this process's environment, before TensorFlow makes a device."""
    given = os.environ.get(GPU_GROWTH_ENV)
    if given is not None and given != GROWTH and REPLACED_ENV not in os.environ:
        os.environ[REPLACED_ENV] = given
    os.environ[GPU_GROWTH_ENV] = GROWTH


def describe() -> str:
    """The header's words where the user's own value was replaced; "" otherwise."""
    replaced = os.environ.get(REPLACED_ENV)
    if replaced is None:
        return ""
    return (
        f"{GPU_GROWTH_ENV}={GROWTH} on both sides, not {replaced!r} as set (they share a GPU, and "
        "neither may take all of its memory)"
    )
