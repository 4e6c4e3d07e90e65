"""DDPG's actor policy in torch, computing exactly the TF policy (torch; never TensorFlow).

``DDPGPolicy`` is :mod:`actorq.algorithms.ddpg.tf_networks`' policy::

    x -> [torso.i (Linear) -> relu] for i = 0 .. len(layers)-1 -> head (Linear) -> tanh -> (t + 1) / 2 * (high - low)
      + low   (TanhToSpec)

The state-dict keys are the names on the wire; the action bounds are plain attributes, not buffers, so they are
neither sent nor cast by ``.half()``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actorq.networks.torch_nets import layer_widths


class DDPGPolicy(nn.Module):
    """DDPG's deterministic policy: relu MLP -> Linear -> TanhToSpec.

    Args:
        obs_dim: Flat observation size.
        act_dim: Action dimensions.
        layers: Hidden widths.
        action_low: Lower action bound(s), scalar or ``[act_dim]``.
        action_high: Upper action bound(s).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        layers: Sequence[int],
        action_low: float | np.ndarray = -1.0,
        action_high: float | np.ndarray = 1.0,
    ):
        super().__init__()
        pairs = layer_widths(obs_dim, layers)
        self.torso = nn.ModuleList(nn.Linear(i, o) for i, o in pairs)
        self.head = nn.Linear(pairs[-1][1], int(act_dim))
        low = np.broadcast_to(np.asarray(action_low, np.float64), (int(act_dim),))
        high = np.broadcast_to(np.asarray(action_high, np.float64), (int(act_dim),))
        if not (np.isfinite(low).all() and np.isfinite(high).all() and (high >= low).all()):
            raise ValueError(f"action bounds must be finite with high >= low, got {low} and {high}")
        # TanhToSpec keeps (max - min) and min in the spec's dtype and TF casts them to float32 in the product.
        self.action_scale = torch.from_numpy((high - low).astype(np.float32))
        self.action_offset = torch.from_numpy(low.astype(np.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.torso:
            x = F.relu(layer(x))
        # Rescale in float32 whatever the module's dtype: the bounds are float32 on the TF side too.
        t = torch.tanh(self.head(x)).float()
        return (0.5 * (t + 1.0)) * self.action_scale + self.action_offset


def make(
    obs_dim: int,
    out_dim: int,
    layers: Sequence[int],
    action_low: float | np.ndarray = -1.0,
    action_high: float | np.ndarray = 1.0,
) -> DDPGPolicy:
    """The DDPG policy with the algorithms' common factory signature (``Algorithm.torch_policy``)."""
    return DDPGPolicy(obs_dim, out_dim, layers, action_low, action_high)
