"""What every algorithm's TF networks share (TensorFlow; never imports torch): creating a policy's variables and
reading them by name.

Each algorithm's networks live in its package (``actorq/algorithms/<name>/tf_networks.py``), built in a fixed name
scope so that their variable names are deterministic: the left column of the table in :mod:`actorq.networks.mapping`.
"""

from __future__ import annotations

import numpy as np
import sonnet as snt
import tensorflow as tf


def create_variables(
    module: snt.Module, obs_dim: int | tuple[int, ...], dtype: tf.DType = tf.float32
) -> None:
    """Create a policy's (or Q-network's) variables with one dummy call on a ``[1, obs_dim]`` batch (``[1,
    *obs_shape]`` for a shape, e.g. an image's, of ``dtype``)."""
    shape = [int(d) for d in obs_dim] if isinstance(obs_dim, tuple) else [int(obs_dim)]
    module(tf.zeros([1, *shape], dtype))


def policy_variables(policy_module: snt.Module) -> dict[str, np.ndarray]:
    """``{TF variable name without ':0': float32 numpy copy}`` of a policy or Q-network, in creation order.

    Raises:
        ValueError: The module has no variables yet (call :func:`create_variables` or run it once first).
    """
    variables = policy_module.variables
    if not variables:
        raise ValueError(f"module {policy_module.name!r} has no variables yet: call create_variables() first")
    out: dict[str, np.ndarray] = {}
    for v in variables:
        name = v.name[:-2] if v.name.endswith(":0") else v.name
        if name in out:
            raise ValueError(f"duplicate variable name {name!r}: build the network with make_*_network*")
        out[name] = np.asarray(v.numpy(), dtype=np.float32)
    return out
