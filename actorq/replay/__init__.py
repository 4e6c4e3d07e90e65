"""Everything that touches DeepMind Reverb: tables, the server, client connection, adders, datasets, weight pub/sub.

This is the only package that imports ``reverb`` (a test enforces it). These tables live on one server:

- ``priority_table`` (EXPERIENCE_TABLE): n-step transitions from actors, sampled by the learner (uniform for D4PG,
  prioritized for DQN, whose learner updates priorities); a samples-per-insert rate limiter keeps the learner and
  actors in step. The name is Acme's default, which Acme's DQN learner writes priorities to.
- ``learner_weights``: the newest fp32 weight message from the learner (max size 1), read by the quantizer.
- ``policy``: the newest quantized weight message (max size 1), read by every actor any number of times.
- ``run_state_<label>``: one per actor, the quantizer and the evaluator: the role's newest resume record (max size
  1; ``actorq.replay.run_state``), so a role restarted on any host continues its counters.
"""

from actorq.replay.client import ReplayUnreachableError, wait_for_server
from actorq.replay.tables import (
    EXPERIENCE_TABLE,
    LEARNER_WEIGHTS_TABLE,
    POLICY_TABLE,
    experience_inserts,
    make_server,
    make_tables,
)
from actorq.replay.weights import ReverbWeightPublisher, ReverbWeightSubscriber

__all__ = [
    "EXPERIENCE_TABLE",
    "LEARNER_WEIGHTS_TABLE",
    "POLICY_TABLE",
    "ReplayUnreachableError",
    "ReverbWeightPublisher",
    "ReverbWeightSubscriber",
    "experience_inserts",
    "make_server",
    "make_tables",
    "wait_for_server",
]
