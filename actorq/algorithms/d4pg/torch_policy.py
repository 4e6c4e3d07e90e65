"""D4PG's actor policy in torch, computing exactly the TF policy (torch; never TensorFlow).

``D4PGPolicy`` is Acme's D4PG policy (see :mod:`actorq.algorithms.d4pg.tf_networks`)::

    x -> torso.0 (Linear) -> norm (LayerNorm, eps 1e-5 as Sonnet) -> tanh
      -> [torso.i (Linear) -> elu] for i = 1 .. len(layers)-1     (LayerNormMLP has activate_final=True)
      -> head (Linear) -> tanh -> (t + 1) / 2 * (high - low) + low   (TanhToSpec)

The state-dict keys are the names on the wire; the action bounds are plain attributes, not buffers, so they are
neither sent nor cast by ``.half()``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actorq.networks.torch_nets import SONNET_LAYER_NORM_EPS, layer_widths


class D4PGPolicy(nn.Module):
    """Acme's D4PG policy: LayerNormMLP(activate_final) -> Linear -> TanhToSpec.

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
        self.norm = nn.LayerNorm(pairs[0][1], eps=SONNET_LAYER_NORM_EPS)
        self.head = nn.Linear(pairs[-1][1], int(act_dim))
        low = np.broadcast_to(np.asarray(action_low, np.float64), (int(act_dim),))
        high = np.broadcast_to(np.asarray(action_high, np.float64), (int(act_dim),))
        if not (np.isfinite(low).all() and np.isfinite(high).all() and (high >= low).all()):
            raise ValueError(f"action bounds must be finite with high >= low, got {low} and {high}")
        # TanhToSpec keeps (max - min) and min in the spec's dtype and TF casts them to float32 in the product.
        self.action_scale = torch.from_numpy((high - low).astype(np.float32))
        self.action_offset = torch.from_numpy(low.astype(np.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.norm(self.torso[0](x)))
        for layer in self.torso[1:]:
            x = F.elu(layer(x))
        # Rescale in float32 whatever the module's dtype: the bounds are float32 on the TF side too.
        t = torch.tanh(self.head(x)).float()
        return (0.5 * (t + 1.0)) * self.action_scale + self.action_offset


def make(
    obs_dim: int,
    out_dim: int,
    layers: Sequence[int],
    action_low: float | np.ndarray = -1.0,
    action_high: float | np.ndarray = 1.0,
) -> D4PGPolicy:
    """The D4PG policy with the algorithms' common factory signature (``Algorithm.torch_policy``)."""
    return D4PGPolicy(obs_dim, out_dim, layers, action_low, action_high)
