"""A trained run's policy weights, read from its learner checkpoint without building the learner (TensorFlow;
never torch).

The learner checkpoints through Acme's checkpointer into ``RUN_DIR/checkpoints/learner`` (``ckpt-N``, the newest
few kept). A TF2 checkpoint is object-based: its object graph names each saved object by the key the learner
builder gave it (``network`` for DQN, ``policy`` for D4PG/DDPG: the algorithm's
:attr:`~actorq.algorithms.base.Algorithm.checkpoint_policy`) and records every variable's own name (``full_name``,
e.g. ``q_network/linear_0/w``). The variables under the policy's object are therefore exactly the TF names that
:func:`actorq.networks.mapping.tf_to_torch_state` maps to the actors' torch keys, whatever the torso: the reader
knows no architecture. The online policy is read, never the target copy (which has the same variable names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from actorq.errors import UsageError

CHECKPOINT_SUBDIR = Path("checkpoints") / "learner"
"""Where a run's learner checkpoints are, under its run directory (Acme adds ``checkpoints/<subdirectory>``)."""

_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
_STEPS_KEY = "num_steps"


class CheckpointError(UsageError):
    """The run directory has no (such) learner checkpoint, or the checkpoint lacks the policy: ``error:``, exit 2."""


@dataclass(frozen=True)
class PolicyCheckpoint:
    """The online policy's variables of one learner checkpoint."""

    number: int
    """``N`` of ``ckpt-N`` (Acme's save counter)."""
    learner_step: int
    """The learner steps taken when it was saved (-1 when the checkpoint does not record them)."""
    variables: dict[str, np.ndarray]
    """``{TF variable name: float32 array}``: what ``tf_nets.policy_variables`` gives in the live learner."""


def available(run_dir: str | Path) -> list[int]:
    """The checkpoint numbers kept in ``run_dir`` (ascending; empty when there is none)."""
    directory = Path(run_dir) / CHECKPOINT_SUBDIR
    numbers = []
    for index in directory.glob("ckpt-*.index"):
        match = re.fullmatch(r"ckpt-(\d+)\.index", index.name)
        if match:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def _prefix(run_dir: Path, number: int | None) -> tuple[int, Path]:
    numbers = available(run_dir)
    if not numbers:
        raise CheckpointError(
            f"{run_dir} has no learner checkpoint ({CHECKPOINT_SUBDIR}/ckpt-N.index): pass the RUN_DIR of an "
            "`actorq train` run whose learner saved one (learner.checkpoint_period_s > 0)"
        )
    if number is None:
        number = numbers[-1]
    elif number not in numbers:
        raise CheckpointError(
            f"{run_dir} has no learner checkpoint {number}; it keeps {', '.join(map(str, numbers))}"
        )
    return number, run_dir / CHECKPOINT_SUBDIR / f"ckpt-{number}"


def read_policy(run_dir: str | Path, policy_key: str, number: int | None = None) -> PolicyCheckpoint:
    """The online policy's variables in ``run_dir``'s learner checkpoint ``number`` (default: the newest).

    Args:
        run_dir: An ``actorq train`` run directory.
        policy_key: The algorithm's :attr:`~actorq.algorithms.base.Algorithm.checkpoint_policy`.
        number: ``N`` of ``ckpt-N``; None for the newest (the learner's final weights after a finished run).

    Raises:
        CheckpointError: No such checkpoint, an unreadable one, or no object ``policy_key`` in it.
    """
    run_dir = Path(run_dir)
    number, prefix = _prefix(run_dir, number)
    try:
        reader = tf.train.load_checkpoint(str(prefix))
        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH))
    except (tf.errors.OpError, ValueError) as exc:
        raise CheckpointError(f"learner checkpoint {prefix} cannot be read: {exc}") from None
    roots = {child.local_name: child.node_id for child in graph.nodes[0].children}
    if policy_key not in roots:
        raise CheckpointError(
            f"learner checkpoint {prefix} has no object {policy_key!r} (it saves {sorted(roots)}): "
            "was it written by another algorithm's learner?"
        )
    variables: dict[str, np.ndarray] = {}
    seen: set[int] = set()
    stack = [roots[policy_key]]
    while stack:
        node_id = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE" and attribute.full_name:
                value = np.asarray(reader.get_tensor(attribute.checkpoint_key), dtype=np.float32)
                variables[attribute.full_name] = value
        stack.extend(child.node_id for child in node.children)
    if not variables:
        raise CheckpointError(f"learner checkpoint {prefix}: the object {policy_key!r} holds no variables")
    steps = -1
    if _STEPS_KEY in roots:
        for attribute in graph.nodes[roots[_STEPS_KEY]].attributes:
            if attribute.name == "VARIABLE_VALUE":
                steps = int(reader.get_tensor(attribute.checkpoint_key))
    return PolicyCheckpoint(number, steps, variables)
