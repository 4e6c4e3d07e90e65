"""Full-precision TensorFlow learners built on Acme's own TF learners (never torch): what every algorithm shares.

``make_learner(config, environment_spec, replay_address, checkpoint_dir)`` asks the config's algorithm
(:mod:`actorq.algorithms`) for its learner builder (``actorq/algorithms/<name>/tf_learner.py``: ``build``, one
signature for all) and returns the :class:`AcmeLearner` it builds:
``step()`` takes one Acme learner step, ``get_variables()`` returns the policy's fp32 variables keyed by their TF
names (what ``actorq.networks.mapping`` converts to torch keys), ``save(force)`` checkpoints learner variables,
optimizer state and counters through Acme's checkpointer (restored automatically on construction).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import sonnet as snt
import tensorflow as tf
from acme import specs as acme_specs
from acme.tf import savers as tf2_savers
from acme.utils import counting

from actorq import algorithms
from actorq.config import ExperimentConfig
from actorq.learners import acme_adapter
from actorq.networks import tf_nets

log = logging.getLogger(__name__)


class _LastResult:
    """An Acme logger that keeps the learner's last fetches (losses) for our own metrics."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def write(self, data: dict[str, Any]) -> None:
        self.data = data

    def close(self) -> None:
        pass


def configure_tensorflow(intra_op_threads: int = 0, inter_op_threads: int = 0) -> list[str]:
    """Use a GPU when TensorFlow sees one (memory growth on), set CPU thread pools if asked; returns GPU names.

    Must run before TensorFlow executes its first op (thread pools are fixed from then on).
    """
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
    if inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads)
    return [g.name for g in gpus]


class _SampleFeed:
    """Stands in for an Acme learner's dataset iterator while its step is traced: ``next()`` gives the sample
    passed to the update function, so the step's maths (Acme's own code) runs on a sample taken outside it."""

    def __init__(self) -> None:
        self.sample: Any = None

    def __iter__(self) -> _SampleFeed:
        return self

    def __next__(self) -> Any:
        return self.sample


def make_update_function(learner: Any, acme_class: type, jit_compile: bool = False) -> Callable[[Any], Any]:
    """``update(sample) -> fetches``: one Acme learner step (losses, gradients, optimizer, target update) on a
    given replay sample, as a ``tf.function`` (XLA-compiled when ``jit_compile``).

    It traces Acme's own ``_step`` body with the dataset iterator swapped for the sample, so the maths is exactly
    Acme's; only where the sample comes from changes (XLA cannot compile the Reverb dataset op).
    """
    body = acme_adapter.step_body(acme_class)

    def update(sample):
        feed = _SampleFeed()
        feed.sample = sample
        with acme_adapter.iterator_replaced(learner, feed):
            return body(learner)

    return tf.function(update, jit_compile=jit_compile)


class CompiledOptimizer:
    """Stands in for a Sonnet optimizer inside an Acme learner: ``apply`` runs as one XLA-compiled function.

    Only where Acme's step calls ``apply``: the optimizer itself (its slots, its checkpoint) is unchanged.
    """

    def __init__(self, optimizer: snt.Optimizer):
        self.optimizer = optimizer
        self.apply = tf.function(optimizer.apply, jit_compile=True)

    def __getattr__(self, name: str) -> Any:  # everything else (variables, slots, step) is the optimizer's
        return getattr(self.optimizer, name)


class AcmeLearner:
    """An Acme TF learner plus what the learner role needs around it."""

    def __init__(
        self,
        learner: Any,
        policy: snt.Module,
        counter: counting.Counter,
        results: _LastResult,
        objects_to_save: dict[str, Any],
        checkpoint_dir: str | Path | None,
        checkpoint_period_s: float,
        acme_class: type | None = None,
        jit_compile: bool = False,
        target_pairs: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ()),
    ):
        self._learner = learner
        self._policy = policy
        self._counter = counter
        self._results = results
        self._num_steps = objects_to_save["num_steps"]
        self._acme_class = acme_class or type(learner)
        self._iterator = acme_adapter.dataset_iterator(learner)  # the Reverb dataset iterator
        self._update: Callable[[Any], Any] | None = None
        self._target_pairs = target_pairs
        self._copy_targets: Callable[[], None] | None = None
        if jit_compile:
            # Sample outside, update inside the compiled function: Acme's step() calls self._step().
            self._update = make_update_function(learner, self._acme_class, jit_compile=True)
            acme_adapter.replace_step(learner, lambda: self._update(next(self._iterator)))
        self._checkpointer = None
        if checkpoint_dir is not None:
            self._checkpointer = tf2_savers.Checkpointer(
                objects_to_save=objects_to_save,
                directory=str(checkpoint_dir),
                subdirectory="learner",
                time_delta_minutes=max(checkpoint_period_s, 1.0) / 60.0,
                add_uid=False,
                max_to_keep=2,
            )

    @property
    def steps(self) -> int:
        """Learner steps taken (restored from a checkpoint on resume)."""
        return int(self._num_steps.numpy())

    @property
    def losses(self) -> dict[str, float]:
        """The last step's losses."""
        return {k: float(np.asarray(v)) for k, v in self._results.data.items() if "loss" in k}

    def step(self) -> None:
        self._learner.step()

    # -- the parts of a step, for `actorq bench learner` --------------------------------------------------------
    def sample(self) -> Any:
        """One batch from the learner's own replay dataset iterator (what a step consumes)."""
        return next(self._iterator)

    def update(self, sample: Any) -> dict[str, Any]:
        """One step's update (losses, gradients, optimizer, target update) on ``sample``, as the learner runs it."""
        if self._update is None:
            self._update = make_update_function(self._learner, self._acme_class, jit_compile=False)
        return self._update(sample)

    def copy_targets(self) -> None:
        """The online -> target variable copy a step does every ``target_update_period`` steps."""
        if self._copy_targets is None:
            online, target = self._target_pairs
            if len(online) != len(target):
                raise ValueError(f"{len(online)} online but {len(target)} target variables")

            @tf.function
            def copy() -> None:
                for src, dest in zip(online, target):  # noqa: B905  (autograph's zip takes no strict=)
                    dest.assign(src)

            self._copy_targets = copy
        self._copy_targets()

    def get_variables(self) -> dict[str, np.ndarray]:
        """The policy network's variables (fp32 numpy), keyed by TF variable name."""
        return tf_nets.policy_variables(self._policy)

    def save(self, force: bool = False) -> bool:
        """Checkpoint when the period has passed (or now when ``force``); returns whether it saved."""
        return bool(self._checkpointer and self._checkpointer.save(force=force))

    @property
    def policy_module(self) -> snt.Module:
        return self._policy


def make_learner(
    config: ExperimentConfig,
    environment_spec: acme_specs.EnvironmentSpec,
    replay_address: str,
    checkpoint_dir: str | Path | None = None,
) -> AcmeLearner:
    """Build the configured algorithm's Acme learner (its ``learner_builder``) reading from ``replay_address``."""
    acme_adapter.check_surface()  # an Acme that moved a private member fails here, not mid-training
    build = algorithms.get(config.algorithm).learner_builder.load()
    # The run's seed sets the networks' initial weights: a seed's runs at every precision start from the same
    # policy (so comparing them pairs like with like), and a rerun of a seed starts where it did.
    tf.random.set_seed(config.seed)
    return build(config, environment_spec, replay_address, counting.Counter(), _LastResult(), checkpoint_dir)
