"""DQN's Q-network in torch, computing exactly the TF Q-network (torch; never TensorFlow).

``QNetwork`` is ``snt.nets.MLP([*layers, num_actions])``: ``[torso.i -> relu]* -> head``; the state-dict keys
(``torso.0.weight`` ... ``head.bias``) are the names on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actorq.networks.torch_nets import layer_widths


class QNetwork(nn.Module):
    """DQN Q-network ``snt.nets.MLP([*layers, num_actions])``: relu hidden layers, linear output.

    Args:
        obs_dim: Flat observation size.
        num_actions: Number of discrete actions.
        layers: Hidden widths.
    """

    def __init__(self, obs_dim: int, num_actions: int, layers: Sequence[int]):
        super().__init__()
        pairs = layer_widths(obs_dim, layers)
        self.torso = nn.ModuleList(nn.Linear(i, o) for i, o in pairs)
        self.head = nn.Linear(pairs[-1][1], int(num_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.torso:
            x = F.relu(layer(x))
        return self.head(x)


def make(
    obs_dim: int,
    out_dim: int,
    layers: Sequence[int],
    action_low: float | np.ndarray | None = None,
    action_high: float | np.ndarray | None = None,
) -> QNetwork:
    """The DQN Q-network with the algorithms' common factory signature (a Q-network has no action bounds)."""
    return QNetwork(obs_dim, out_dim, layers)
