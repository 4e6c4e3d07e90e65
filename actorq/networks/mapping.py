"""The explicit TF (Sonnet) -> torch parameter mapping of the actor policies (numpy only).

The original QuaRL/ActorQ code loaded learner weights into a torch actor by position and applied tanh after the
last hidden layer where the TF learner did not: the actors never ran the learner's function. Here every TF
variable has one named torch counterpart, listed literally below, and the shapes are checked both ways.

D4PG policy (Acme ``LayerNormMLP(layers, activate_final=True) -> NearZeroInitializedLinear -> TanhToSpec``,
built by :func:`actorq.algorithms.d4pg.tf_networks.make_networks` under the name scope ``policy``)::

    TF variable                                         torch key        transform
    policy/feedforward_mlp_torso/linear/w               torso.0.weight   transpose [in, out] -> [out, in]
    policy/feedforward_mlp_torso/linear/b               torso.0.bias
    policy/feedforward_mlp_torso/layer_norm/scale       norm.weight
    policy/feedforward_mlp_torso/layer_norm/offset      norm.bias
    policy/feedforward_mlp_torso/mlp/linear_{i}/w       torso.{i+1}.weight   transpose   (i = 0 .. len(layers)-2)
    policy/feedforward_mlp_torso/mlp/linear_{i}/b       torso.{i+1}.bias
    policy/near_zero_initialized_linear/w               head.weight      transpose
    policy/near_zero_initialized_linear/b               head.bias

DQN Q-network (``snt.nets.MLP([*layers, num_actions], name="q_network")``)::

    q_network/linear_{i}/w          torso.{i}.weight   transpose   (i = 0 .. len(layers)-1)
    q_network/linear_{i}/b          torso.{i}.bias
    q_network/linear_{n}/w          head.weight        transpose   (n = len(layers))
    q_network/linear_{n}/b          head.bias

With the Nature CNN torso (``network.torso``, :mod:`actorq.algorithms.torso`; DQN), its convolutions come first,
under the same scope, and the dense rows above follow unchanged (``torso.0`` then reads the 3136 conv features
in TF's height-width-channel flatten order, which the torch twin keeps)::

    q_network/conv_{i}/w            conv.{i}.weight    Sonnet [kh, kw, in, out] -> torch [out, in, kh, kw]
    q_network/conv_{i}/b            conv.{i}.bias                                  (i = 0, 1, 2)

"transpose" always means Sonnet's layout to torch's (:func:`to_torch_layout`): ``[in, out] -> [out, in]`` for a
dense weight, ``[kh, kw, in, out] -> [out, in, kh, kw]`` for a convolution's.

TanhToSpec has no variables: the action bounds come from the environment spec on both sides. Each table is
written once, in its algorithm's module (``actorq.algorithms.d4pg`` / ``dqn``: ``mapping_rows``; a conv torso's
rows in ``actorq.algorithms.torso.conv_rows``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from actorq import algorithms
from actorq.algorithms.torso import Torso
from actorq.errors import ActorQError


class MappingError(ActorQError, ValueError):
    """The TF variables don't match the policy architecture: names missing or unexpected, or shapes differ."""


def _check_layers(layers: tuple[int, ...]) -> tuple[int, ...]:
    layers = tuple(int(w) for w in layers)
    if not layers or any(w <= 0 for w in layers):
        raise ValueError(f"layers must be a non-empty tuple of positive widths, got {layers}")
    return layers


def to_torch_layout(value: np.ndarray) -> np.ndarray:
    """A Sonnet weight in torch's layout: ``[in, out] -> [out, in]``, ``[kh, kw, in, out] -> [out, in, kh, kw]``."""
    if value.ndim == 2:
        return value.T
    if value.ndim == 4:
        return value.transpose(3, 2, 0, 1)
    raise MappingError(f"no Sonnet -> torch layout for a {value.ndim}-D weight (shape {value.shape})")


def tf_layout_shape(torch_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The Sonnet shape of a weight whose torch shape is ``torch_shape`` (inverse of :func:`to_torch_layout`)."""
    if len(torch_shape) == 4:
        out, fan_in, kh, kw = torch_shape
        return (kh, kw, fan_in, out)
    return tuple(torch_shape[::-1])


def to_tf_layout(value: np.ndarray) -> np.ndarray:
    """A torch weight in Sonnet's layout (inverse of :func:`to_torch_layout`)."""
    if value.ndim == 2:
        return value.T
    if value.ndim == 4:
        return value.transpose(2, 3, 1, 0)
    raise MappingError(f"no torch -> Sonnet layout for a {value.ndim}-D weight (shape {value.shape})")


def mapping_table(
    algorithm: str, layers: tuple[int, ...], scope: str | None = None, torso: Torso | None = None
) -> list[tuple[str, str, bool]]:
    """The mapping as rows ``(tf_name, torch_key, transpose)``, in network order (the algorithm module's rows).

    Args:
        algorithm: A registered algorithm's name (``"d4pg"``, ``"dqn"``).
        layers: Hidden widths of the policy / Q-network.
        scope: Root name scope of the TF variables; ``None`` uses the algorithm's (what ``tf_nets`` builds);
            ``""`` for a D4PG policy built without a scope (Acme's own ``make_default_networks``).
        torso: The policy's torso (None: ``mlp``); a conv torso's rows come first.
    """
    algo = algorithms.get(algorithm)
    layers = _check_layers(layers)
    root = algo.network.tf_scope if scope is None else scope
    prefix = f"{root}/" if root else ""
    head = algo.torso_rows(torso, prefix) if torso is not None and torso.is_conv else []
    return head + algo.mapping_rows(layers, prefix)


def torch_state_shapes(
    algorithm: str, obs_dim: int, out_dim: int, layers: tuple[int, ...], torso: Torso | None = None
) -> dict[str, tuple[int, ...]]:
    """``{torch key: shape}`` of the actor policy: what an actor expects in a weight message.

    Args:
        algorithm: A registered algorithm's name.
        obs_dim: Flat observation size (elements per observation).
        out_dim: Action dimensions (D4PG) or number of discrete actions (DQN).
        layers: Hidden widths.
        torso: The policy's torso (None: ``mlp``); a conv torso's weights come first and the first dense layer
            reads its features.
    """
    first_layer_norm = algorithms.get(algorithm).network.first_layer_norm
    layers = _check_layers(layers)
    shapes: dict[str, tuple[int, ...]] = {}
    if torso is not None and torso.is_conv:
        if torso.obs_dim != int(obs_dim):
            raise MappingError(f"obs_dim {obs_dim} is not the torso's {torso.obs_shape} ({torso.obs_dim})")
        for i, shape in enumerate(torso.conv_weight_shapes()):
            shapes[f"conv.{i}.weight"] = shape
            shapes[f"conv.{i}.bias"] = (shape[0],)
        obs_dim = torso.features
    widths = (int(obs_dim), *layers)
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        shapes[f"torso.{i}.weight"] = (fan_out, fan_in)
        shapes[f"torso.{i}.bias"] = (fan_out,)
        if first_layer_norm and i == 0:
            shapes["norm.weight"] = (fan_out,)
            shapes["norm.bias"] = (fan_out,)
    shapes["head.weight"] = (int(out_dim), layers[-1])
    shapes["head.bias"] = (int(out_dim),)
    return shapes


def tf_to_torch_state(
    algorithm: str,
    tf_vars: Mapping[str, np.ndarray],
    layers: tuple[int, ...],
    scope: str | None = None,
    torso: Torso | None = None,
) -> dict[str, np.ndarray]:
    """Convert policy variables keyed by TF name to a torch state dict (float32, C-contiguous numpy arrays).

    Args:
        algorithm: A registered algorithm's name.
        tf_vars: ``{tf variable name (no ':0'): array}``, e.g. from ``tf_nets.policy_variables``.
        layers: Hidden widths the actor was configured with.
        scope: Root name scope; see :func:`mapping_table`.
        torso: The policy's torso (None: ``mlp``); a conv torso's shapes follow from its observation shape.

    Returns:
        ``{torch key: array}`` in network order; Sonnet ``w`` ([in, out]; a convolution's [kh, kw, in, out])
        becomes torch ``weight`` ([out, in]; [out, in, kh, kw]).

    Raises:
        MappingError: Names missing or unexpected (all of them are listed), or shapes that don't fit ``layers``.
    """
    rows = mapping_table(algorithm, layers, scope, torso)
    names = {name[:-2] if name.endswith(":0") else name: name for name in tf_vars}
    missing = [tf_name for tf_name, _, _ in rows if tf_name not in names]
    unexpected = sorted(set(names) - {tf_name for tf_name, _, _ in rows})
    if missing or unexpected:
        raise MappingError(
            f"{algorithm} policy with layers {tuple(layers)}: "
            + (f"missing TF variables {missing}" if missing else "")
            + ("; " if missing and unexpected else "")
            + (f"unexpected TF variables {unexpected}" if unexpected else "")
        )
    arrays = {tf_name: np.asarray(tf_vars[names[tf_name]]) for tf_name, _, _ in rows}
    # The input width and the output width are the only sizes not fixed by ``layers``; read them off the
    # first weight and the head bias, then demand every shape agrees with them.
    first_w = arrays[rows[0][0]]
    head_b = arrays[rows[-1][0]]
    conv = torso is not None and torso.is_conv
    if first_w.ndim != (4 if conv else 2) or head_b.ndim != 1:
        raise MappingError(
            f"{rows[0][0]} must be {4 if conv else 2}-D and {rows[-1][0]} 1-D, got shapes {first_w.shape} and "
            f"{head_b.shape}"
        )
    obs_dim = torso.obs_dim if conv else first_w.shape[0]
    expected = torch_state_shapes(algorithm, obs_dim, head_b.shape[0], layers, torso)
    out: dict[str, np.ndarray] = {}
    mismatches = []
    for tf_name, key, transpose in rows:
        value = arrays[tf_name]
        want = tf_layout_shape(expected[key]) if transpose else expected[key]
        if value.shape != want:
            mismatches.append(f"{tf_name} has shape {value.shape}, expected {want} (for {key})")
            continue
        value = to_torch_layout(value) if transpose else value
        out[key] = np.ascontiguousarray(value, dtype=np.float32)
    if mismatches:
        raise MappingError(f"{algorithm} policy with layers {tuple(layers)}: " + "; ".join(mismatches))
    return out


def torch_to_tf_state(
    algorithm: str,
    state: Mapping[str, np.ndarray],
    layers: tuple[int, ...],
    scope: str | None = None,
    torso: Torso | None = None,
) -> dict[str, np.ndarray]:
    """The inverse of :func:`tf_to_torch_state`: torch-keyed weights under their TF names, in Sonnet's layout
    (what a learner publishes; benchmarks publish a torch policy's weights this way)."""
    rows = mapping_table(algorithm, layers, scope, torso)
    return {
        tf_name: np.ascontiguousarray(to_tf_layout(np.asarray(state[key])) if transpose else state[key])
        for tf_name, key, transpose in rows
    }
