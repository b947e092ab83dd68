"""Matmul FLOP/s: a chain of dense NxN products inside one compiled function.

Each product consumes the previous one (``x = x @ b``), so the compiler cannot hoist a
loop-invariant product out of the loop and run it once; the chain ends in a reduction to a
scalar, so fetching that scalar waits for every product. One call is a fixed amount of work,
``2·N³·steps`` per replica, which is what makes per-round times comparable across runs.
"""

from __future__ import annotations

import math
from typing import Any

TERA = 1e12


def flops(n: int, steps: int, replicas: int = 1) -> float:
    """Floating-point operations of one call: ``2·N³`` per product (multiply and add)."""
    return 2.0 * n**3 * steps * replicas


def tflops(n: int, steps: int, replicas: int, seconds: float) -> float:
    """Throughput of one call that took ``seconds``, in TFLOP/s."""
    return flops(n, steps, replicas) / seconds / TERA


def chain_steps(n: int, flops_per_round: float, minimum: int = 2) -> int:
    """Products per call so that a call does about ``flops_per_round`` work (at least ``minimum``,
    so that every call really is a chain)."""
    return max(minimum, round(flops_per_round / flops(n, 1)))


class MatmulChain:
    """``steps`` chained NxN products on every replica of ``strategy``; calling returns a float.

    ``jit_compile`` applies to the per-replica chain (the part that does the work); it is always
    explicit because XLA and TensorFlow's own kernels differ in speed by device and dtype.
    """

    def __init__(
        self,
        n: int,
        dtype: str = "float32",
        steps: int = 8,
        strategy: Any = None,
        jit_compile: bool = False,
        seed: int = 0,
    ) -> None:
        import tensorflow as tf

        if n < 1 or steps < 1:
            raise ValueError(f"need n >= 1 and steps >= 1, got n={n}, steps={steps}")
        self.n, self.dtype, self.steps, self.jit_compile = n, dtype, steps, jit_compile
        self.strategy = strategy or tf.distribute.get_strategy()
        with self.strategy.scope():
            self._start, self._factor = _operands(tf, n, _stored_dtype(dtype, self.strategy), seed)
        self._call = self._build(tf)

    @property
    def replicas(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    @property
    def flops(self) -> float:
        """Work of one call, over all replicas."""
        return flops(self.n, self.steps, self.replicas)

    def __call__(self) -> float:
        """Run the chain once on every replica; the float fetch waits for the device."""
        return float(self._call())

    def _build(self, tf: Any) -> Any:
        start, factor, steps, strategy = self._start, self._factor, self.steps, self.strategy

        dtype = self.dtype

        def chain_body() -> Any:
            # Identity casts unless the operands are stored wider (see _stored_dtype).
            x, b = tf.cast(start.read_value(), dtype), tf.cast(factor.read_value(), dtype)
            for _ in tf.range(steps):  # a loop in the graph, like the original's tpu.repeat
                x = tf.matmul(x, b)
            # Reduced in float32 on every replica, so the cross-replica sum below never needs
            # a bfloat16 collective (CPU collectives have no bfloat16 kernels).
            return tf.reduce_sum(tf.cast(x, tf.float32))

        # Only the per-replica chain is compiled with XLA: it is where the work is, and a
        # cross-replica XLA function would have to read every replica's variables from one device.
        chain = tf.function(chain_body, jit_compile=self.jit_compile)

        def on_all_replicas() -> Any:
            partial = strategy.run(chain)
            return strategy.reduce(tf.distribute.ReduceOp.SUM, partial, axis=None)

        return tf.function(on_all_replicas)


def _stored_dtype(dtype: str, strategy: Any) -> str:
    """The operands' storage dtype: ``dtype``, except float32 for bfloat16 in a multi-worker
    cluster. There a variable's initial value is broadcast from the chief by a collective, and
    CPU collectives reject bfloat16 (InvalidArgumentError); the chain casts the operands back
    once per call (N² work beside the chain's 2·N³·steps)."""
    from pytest_tpu.workloads.training import is_multi_worker

    return "float32" if dtype == "bfloat16" and is_multi_worker(strategy) else dtype


def _operands(tf: Any, n: int, dtype: str, seed: int) -> tuple[Any, Any]:
    """The chain's start and its factor, as variables so the compiler cannot fold them.

    Entries of variance 1/N keep ``‖x·b‖ ≈ ‖x‖`` in expectation, so a long chain neither
    overflows nor sinks into denormals (both of which change CPU speed, not just the values).
    Drawn with numpy, outside any strategy's replica logic, so every replica gets the same ones.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    scale = 1.0 / math.sqrt(n)
    start, factor = (rng.standard_normal((n, n), dtype=np.float32) * scale for _ in range(2))
    return (
        tf.Variable(tf.cast(start, dtype), trainable=False),
        tf.Variable(tf.cast(factor, dtype), trainable=False),
    )
