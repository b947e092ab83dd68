"""CIFAR-10 ResNet epoch: ResNet-20 v1 (the Keras CIFAR-10 ResNet example), one epoch per call.

One call is one epoch over a fixed number of whole batches, so every round does the same work.
The first call is the first epoch (tracing, compilation and, on a TPU, the optimizer shards the
published run says take "a couple of minutes"), reported apart.
"""

from __future__ import annotations

from typing import Any

from pytest_tpu.workloads.data import CIFAR10_CLASSES, CIFAR10_SHAPE
from pytest_tpu.workloads.training import EpochRounds

STAGES = (16, 32, 64)  # filters of the three stages
BLOCKS = 3  # residual blocks per stage: depth 6·3 + 2 = 20
WEIGHT_DECAY = 1e-4


def _conv_bn(x: Any, filters: int, kernel: int, strides: int, relu: bool, norm: bool) -> Any:
    """Conv2D → BatchNorm → ReLU, the example's ``resnet_layer`` (v1 order)."""
    from keras import layers, regularizers

    x = layers.Conv2D(
        filters,
        kernel,
        strides=strides,
        padding="same",
        kernel_initializer="he_normal",
        kernel_regularizer=regularizers.l2(WEIGHT_DECAY),
    )(x)
    x = layers.BatchNormalization()(x) if norm else x
    return layers.Activation("relu")(x) if relu else x


def _residual_block(x: Any, filters: int, strides: int) -> Any:
    from keras import layers

    y = _conv_bn(x, filters, 3, strides, relu=True, norm=True)
    y = _conv_bn(y, filters, 3, 1, relu=False, norm=True)
    if strides != 1:  # the shortcut changes shape with the block: a 1x1 projection
        x = _conv_bn(x, filters, 1, strides, relu=False, norm=False)
    return layers.Activation("relu")(layers.add([x, y]))


def build_resnet(jit_compile: bool) -> Any:
    """ResNet-20 v1 for CIFAR-10: 3 stages of 3 residual blocks (16/32/64 filters), batch norm,
    global average pooling, Dense 10; Adam, categorical cross-entropy, accuracy.

    Build it inside ``strategy.scope()`` to spread it over the strategy's replicas.
    """
    import keras
    from keras import layers

    inputs = keras.Input(CIFAR10_SHAPE)
    x = _conv_bn(inputs, STAGES[0], 3, 1, relu=True, norm=True)
    for stage, filters in enumerate(STAGES):
        for block in range(BLOCKS):
            x = _residual_block(x, filters, 2 if stage > 0 and block == 0 else 1)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(CIFAR10_CLASSES, activation="softmax", kernel_initializer="he_normal")(x)
    model = keras.Model(inputs, outputs, name="resnet20_v1")
    model.compile(
        optimizer="adam",
        loss="categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return model


class ResnetEpochs(EpochRounds):
    """One epoch of ResNet-20 on CIFAR-10-shaped data per call, on every replica of ``strategy``.

    ``per_replica_batch`` is the batch each replica sees; a step consumes ``global_batch``
    samples, and an epoch is ``steps`` such steps. Returns the loss.
    """

    build = staticmethod(build_resnet)
    input_shape = CIFAR10_SHAPE
    default_label = "resnet"
