"""DQN's Q-network in torch, computing exactly the TF Q-network (torch; never TensorFlow).

``QNetwork`` is ``snt.nets.MLP([*layers, num_actions])``: ``[torso.i -> relu]* -> head``, after the Nature CNN
(``[conv.i -> relu] x 3 -> flatten``, NHWC as in TF, :mod:`actorq.algorithms.torso`) when the torso is a conv one;
the state-dict keys (``conv.0.weight`` ... ``torso.0.weight`` ... ``head.bias``) are the names on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actorq.algorithms.torso import Torso
from actorq.networks.torch_nets import NhwcConv2d, image_input, layer_widths


class QNetwork(nn.Module):
    """DQN Q-network ``snt.nets.MLP([*layers, num_actions])`` (relu hidden layers, linear output), after a conv
    torso when one is given.

    Args:
        obs_dim: Elements of one observation.
        num_actions: Number of discrete actions.
        layers: Hidden widths of the dense layers.
        torso: A conv torso (None or ``mlp``: the flattened observation feeds the dense layers); the network then
            takes ``[B, *obs_shape]`` observations.
    """

    def __init__(self, obs_dim: int, num_actions: int, layers: Sequence[int], torso: Torso | None = None):
        super().__init__()
        self.image = torso if torso is not None and torso.is_conv else None
        self.conv = nn.ModuleList()
        features = int(obs_dim)
        if self.image is not None:
            for layer, (channels, *_) in zip(self.image.conv, self.image.conv_geometry(), strict=True):
                self.conv.append(NhwcConv2d(channels, layer.channels, layer.kernel, layer.stride))
            features = self.image.features
        pairs = layer_widths(features, layers)
        self.torso = nn.ModuleList(nn.Linear(i, o) for i, o in pairs)
        self.head = nn.Linear(pairs[-1][1], int(num_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.image is not None:
            x = image_input(x, self.image)
            for conv in self.conv:
                x = F.relu(conv(x))
            x = x.reshape(x.shape[0], -1)  # NHWC flatten: TF's order
        for layer in self.torso:
            x = F.relu(layer(x))
        return self.head(x)


def make(
    obs_dim: int,
    out_dim: int,
    layers: Sequence[int],
    action_low: float | np.ndarray | None = None,
    action_high: float | np.ndarray | None = None,
    torso: Torso | None = None,
) -> QNetwork:
    """The DQN Q-network with the algorithms' common factory signature (a Q-network has no action bounds)."""
    return QNetwork(obs_dim, out_dim, layers, torso)
