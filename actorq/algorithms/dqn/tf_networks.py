"""DQN's TF Q-network, as Acme's TF DQN agent uses it (TensorFlow; never torch).

``snt.nets.MLP([*layers, num_actions])`` with relu between layers and a linear output, named ``q_network`` so its
variable names are deterministic: the left column of :meth:`actorq.algorithms.dqn.DQN.mapping_rows`. On image
observations with the Nature CNN torso (``network.torso``, :mod:`actorq.algorithms.torso`) it is
:class:`ConvQNetwork`: Acme's ``DQNAtariNetwork`` torso shape with VALID padding (the Nature DQN network's), the
same dense layers after it, under the same scope.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf

from actorq.algorithms.dqn import ALGORITHM
from actorq.algorithms.torso import PIXEL_SCALE, ConvLayer, Torso

Q_NETWORK_SCOPE = ALGORITHM.network.tf_scope


class Conv2D(snt.Module):
    """A square, strided, VALID ``tf.nn.conv2d`` plus bias on NHWC inputs, variables ``w`` ``[kh, kw, in, out]``
    (Sonnet's default initializer: truncated normal, stddev ``1 / sqrt(fan_in)``) and ``b`` (zeros), as
    ``snt.Conv2D`` would make them. Not ``snt.Conv2D`` itself: Sonnet 2.0.0's reads ``collections.Sequence``, which
    Python 3.10 no longer has."""

    def __init__(self, layer: ConvLayer, name: str):
        super().__init__(name=name)
        self._layer = layer

    @snt.once
    def _initialize(self, inputs: tf.Tensor) -> None:
        k, fan_in = self._layer.kernel, int(inputs.shape[-1])
        init = snt.initializers.TruncatedNormal(stddev=1.0 / np.sqrt(k * k * fan_in))
        self.w = tf.Variable(init([k, k, fan_in, self._layer.channels], tf.float32), name="w")
        self.b = tf.Variable(tf.zeros([self._layer.channels], tf.float32), name="b")

    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        self._initialize(inputs)
        y = tf.nn.conv2d(inputs, self.w, strides=self._layer.stride, padding="VALID", data_format="NHWC")
        return tf.nn.bias_add(y, self.b, data_format="NHWC")


class ConvQNetwork(snt.Module):
    """The Nature DQN Q-network: ``[conv_i -> relu] x 3 -> flatten -> [linear_i -> relu]* -> linear_n``.

    Variables ``q_network/conv_{i}/{w,b}`` (``w``: ``[kh, kw, in, out]``) and ``q_network/linear_{i}/{w,b}``, as
    :func:`actorq.algorithms.torso.conv_rows` and :meth:`~actorq.algorithms.dqn.DQN.mapping_rows` name them.
    Observations arrive as the environment gives them (``uint8`` frames are cast and divided by 255 here, CHW is
    transposed to HWC), so replay holds raw frames and the learner casts each sampled batch.
    """

    def __init__(self, num_actions: int, layers: Sequence[int], torso: Torso, name: str = Q_NETWORK_SCOPE):
        super().__init__(name=name)
        self._torso = torso
        self._convs = [Conv2D(layer, name=f"conv_{i}") for i, layer in enumerate(torso.conv)]
        widths = [*(int(w) for w in layers), int(num_actions)]
        self._linears = [snt.Linear(w, name=f"linear_{i}") for i, w in enumerate(widths)]

    def __call__(self, observations: tf.Tensor) -> tf.Tensor:
        x = tf.cast(observations, tf.float32)
        if self._torso.pixels:
            x = x / PIXEL_SCALE
        if self._torso.channels_first:
            x = tf.transpose(x, [0, 2, 3, 1])
        for conv in self._convs:
            x = tf.nn.relu(conv(x))
        x = snt.Flatten()(x)  # NHWC order: what the torch twin flattens too
        for linear in self._linears[:-1]:
            x = tf.nn.relu(linear(x))
        return self._linears[-1](x)


def make_network(num_actions: int, layers: Sequence[int], torso: Torso | None = None) -> snt.Module:
    """The DQN Q-network named ``q_network``: ``snt.nets.MLP([*layers, num_actions])`` (relu, linear output), or
    :class:`ConvQNetwork` for a conv ``torso``."""
    if torso is not None and torso.is_conv:
        return ConvQNetwork(num_actions, layers, torso)
    return snt.nets.MLP([*layers, int(num_actions)], activation=tf.nn.relu, name=Q_NETWORK_SCOPE)
