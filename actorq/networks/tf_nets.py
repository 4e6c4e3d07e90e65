"""What every algorithm's TF networks share (TensorFlow; never imports torch): creating a policy's variables and
reading them by name.

Each algorithm's networks live in its package (``actorq/algorithms/<name>/tf_networks.py``), built in a fixed name
scope so that their variable names are deterministic: the left column of the table in :mod:`actorq.networks.mapping`.
"""

from __future__ import annotations

import numpy as np
import sonnet as snt
import tensorflow as tf
from dm_env import specs as dm_specs


@snt.allow_empty_variables  # Acme's learners list every network's variables
class FlatObservation(snt.Module):
    """Observations as an MLP takes them: cast to float32 and flattened to ``[B, obs_dim]`` (frames travel as uint8
    through replay; the actors' torch policy casts and flattens them the same way). Has no variables."""

    def __init__(self, name: str = "flat_observation"):
        super().__init__(name=name)
        self._reshape = snt.Flatten()

    def __call__(self, observation: tf.Tensor) -> tf.Tensor:
        return self._reshape(tf.cast(observation, tf.float32))


def needs_flattening(observation_spec) -> bool:
    """The observations are not flat float32 vectors (frames, uint8): an MLP needs :class:`FlatObservation`."""
    return len(observation_spec.shape) != 1 or np.dtype(observation_spec.dtype) != np.float32


def flat_spec(observation_spec) -> dm_specs.Array:
    """The float32 vector spec of what :class:`FlatObservation` makes of ``observation_spec``'s observations."""
    return dm_specs.Array((int(np.prod(observation_spec.shape)),), np.float32, name="observation")


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
