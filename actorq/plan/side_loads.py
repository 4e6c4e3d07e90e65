"""``actorq plan``'s side loads: the CPU the evaluator and the quantizer take from the learner's cores.

In a run the evaluator and the quantizer share the learner's cores (a plan's splits put every role but the actors
there, :data:`actorq.plan.model.LEARNER_ROLES`), but the learner bench runs neither, so a capacity measured
without them over-predicts the run's learner. On the 2-core Zen 3 of issue 34 (CartPole, 3x2048, 8 environments per
actor, spi 0.25, learner, replay, quantizer and evaluator on core 0) the evaluator took 8-19% of core 0 and the
quantizer 6-9% (the runs' ``role_cpu_seconds``), and the learner made 2.9-3.9 steps/s where the plan said 4.29.

:class:`SideLoadBench` times both on the learner's cores while the actors step on theirs (they share the caches
and the memory bus), as CPU seconds of the thread doing the work (the in-process replay servers' threads also run
on those cores; wall time would count them):

* **the evaluator**: loading the learner's message (authenticated, decoded, mapped to torch keys, into its fp32
  policy) and one evaluation step (a greedy forward at batch ``evaluator.episodes``, then a step of each
  environment), once per ``evaluator.period_s``. An evaluation is taken to last the task's step limit: the most one costs, which CartPole's episodes
  reach as the policy learns, Acrobot's untrained ones do and dm_control's always do;
* **the quantizer**, per precision: authenticating and decoding the learner's fp32 message, mapping it to torch
  keys, quantizing, encoding and signing the actors' message and inserting it into replay, once per
  ``learner.publish_period`` learner steps; and between messages its polls, every ``quantizer.poll_interval_s``,
  for a new one (a ``server_info`` call each, nothing downloaded). Those are timed as the CPU of the whole process,
  the Reverb client's threads and the in-process server answering them: in a run both are on the learner's cores.
  On the Zen 3 above a poll took 1.1 ms of CPU (2% of a core at 20 a second) and a message 0.2-0.36 s (2-3%), so
  the plan now accounts for 4-5% of the quantizer's 6-9% in the runs; its run-state saves and metrics are not timed.

:meth:`SideLoads.capacity` turns the learner's capacity measured without them into the capacity beside them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from actorq.config import AUTO_COMM_BITS, ConfigError, ExperimentConfig, replace

PASSES = 3
"""Passes timed of each message load and of the quantizer's work per precision (the median is kept)."""
MIN_EVAL_S = 1.0
"""Evaluation steps are timed for at least this long, also when the block beside them has ended."""
POLLS = 200
"""Idle polls of the learner's table timed (their mean is kept)."""


@dataclass(frozen=True)
class SideLoads:
    """What the evaluator and the quantizer cost on a split's learner cores (measured beside the actors)."""

    learner_cores: int
    """How many cores the learner, replay, quantizer and evaluator share."""
    eval_load_cpu_s: float
    """CPU seconds to load the learner's message into the evaluator's policy, once per evaluation (median)."""
    eval_step_cpu_s: float
    """CPU seconds of one evaluation step: one fp32 forward at batch ``evaluator.episodes`` and that many env steps."""
    eval_steps: int
    """Steps of one evaluation taken for the load: the task's step limit (every episode lasting it)."""
    eval_period_s: float
    """Seconds between evaluations (``evaluator.period_s``)."""
    publish_cpu_s: dict[str, float]
    """Per actor precision: CPU seconds the quantizer spends on one learner message (median of the passes)."""
    publish_period: int
    """Learner steps between the learner's messages (``learner.publish_period``)."""
    poll_cpu_s: float
    """CPU seconds of one idle poll of the quantizer for a new learner message (client and server)."""
    poll_interval_s: float
    """Seconds the quantizer sleeps between idle polls (``quantizer.poll_interval_s``)."""

    @property
    def evaluator_cores(self) -> float:
        """Cores the evaluator keeps busy on average (at most one: it evaluates on one thread)."""
        cpu = self.eval_load_cpu_s + self.eval_steps * self.eval_step_cpu_s
        return min(1.0, cpu / self.eval_period_s)

    @property
    def poll_cores(self) -> float:
        """Cores the quantizer's idle polls keep busy (a poll, then a sleep of ``poll_interval_s``)."""
        return self.poll_cpu_s / (self.poll_cpu_s + self.poll_interval_s)

    def capacity(self, capacity: float, precision: str, batch: int) -> tuple[float, float, float]:
        """The learner's samples/s beside the evaluator and the quantizer, from ``capacity`` measured without them.

        The learner (with its replay) keeps the share of its cores they leave: with E cores for the evaluator, Q
        for the quantizer's polls and q CPU seconds per message, r' = r (1 - E/k - Q/k - q r' / (P k)) at r
        learner steps/s alone on k cores and one message per P steps, so r' = r (1 - E/k - Q/k) / (1 + q r / (P k)).

        Returns:
            ``(samples/s, evaluator's share, quantizer's share)``, the shares of the learner's cores at r'.
        """
        k = self.learner_cores
        rate = capacity / batch
        evaluator, polls = self.evaluator_cores / k, self.poll_cores / k
        per_step = self.publish_cpu_s[precision] / (self.publish_period * k)
        beside = max(0.0, rate * (1.0 - evaluator - polls) / (1.0 + rate * per_step))
        return beside * batch, evaluator, polls + per_step * beside

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "evaluator_cores": self.evaluator_cores, "poll_cores": self.poll_cores}


def step_limit(config: ExperimentConfig) -> int:
    """The task's steps per episode at most, as the run's environments truncate them (``env.max_episode_steps``
    when set: the wrappers honour it, else the task's own limit).

    Raises:
        ConfigError: the task sets no limit (an evaluation could last forever; set ``env.max_episode_steps``).
    """
    from actorq.envs import make_environment

    env = make_environment(config.env)
    try:
        limit = env.step_limit or _truncated_after(env)
    finally:
        env.close()
    if not limit:
        raise ConfigError(
            f"{config.env.suite}:{config.env.task} has no episode step limit, so an evaluation's cost is unknown: "
            "set env.max_episode_steps"
        )
    return int(limit)


def _truncated_after(env: Any, most: int = 100_000) -> int | None:
    """Steps of one episode of zero actions when it ends truncated (dm_control's time limit, which it keeps
    private), else None (it terminated, or lasted ``most`` steps)."""
    spec = env.action_spec()
    action = np.zeros(spec.shape, spec.dtype)
    ts, steps = env.reset(), 0
    while not ts.last() and steps < most:
        ts = env.step(action)
        steps += 1
    return steps if ts.last() and ts.discount == 1.0 else None


class SideLoadBench:
    """The evaluator's and the quantizer's work, built once (kernel verified, messages encoded), timed on demand.

    Args:
        config: The plan's experiment config.
        precisions: Actor precisions the quantizer is timed for.
        client: A Reverb client of a server with the run's weight tables (ones the actors do not read).
        key: The key messages are signed with, as in a run.
        eval_steps: Steps one evaluation is taken to last (:func:`step_limit`, found once per plan).
    """

    def __init__(
        self, config: ExperimentConfig, precisions: list[str], client: Any, key: Any, eval_steps: int
    ):
        from actorq import algorithms
        from actorq.envs import make_environment
        from actorq.measure.actors_worker import reference_state
        from actorq.networks.mapping import torch_to_tf_state
        from actorq.quantize.codec import encode_message
        from actorq.quantize.signing import LEARNER_STREAM
        from actorq.replay import POLICY_TABLE, ReverbWeightPublisher
        from actorq.roles.policy import build_policy

        self._config = config
        self._precisions = precisions
        self._key = key
        self._steps = eval_steps
        state = reference_state(config)
        # The evaluator's pieces: its fp32 policy at batch `episodes` (kernel verified and timed as the
        # evaluator's is), seeded environments.
        self._episodes = config.evaluator.episodes
        self._policy = build_policy(config, precision="fp32", batch=self._episodes)
        self._policy.load_state(state, version=1, learner_step=0)
        self._algorithm = algorithms.get(config.algorithm)
        self._envs = [make_environment(config.env, seed=j, evaluation=True) for j in range(self._episodes)]
        # The learner's message carries TF-named variables: the mapping's rows read backwards.
        layers = tuple(config.network.policy_layers)
        tf_vars = torch_to_tf_state(config.algorithm, state, layers, torso=self._policy.spec.torso)
        self._learner = encode_message(
            tf_vars, version=1, learner_step=0, precision="fp32", comm_bits=32, key=key, stream=LEARNER_STREAM
        )
        self._sink = ReverbWeightPublisher(client, POLICY_TABLE)
        self._client = client

    def __enter__(self) -> SideLoadBench:
        return self

    def __exit__(self, *exc: object) -> None:
        for env in self._envs:
            env.close()

    def evaluation_step(self, until: float) -> float:
        """CPU seconds per evaluation step, stepping until ``until`` (``time.monotonic()``) and at least
        :data:`MIN_EVAL_S` (an episode that ends restarts, so every forward is a full batch, as the evaluator's are
        until its last episode ends)."""
        obs = np.stack([np.asarray(env.reset().observation, np.float32) for env in self._envs])
        steps, cpu = 0, 0.0
        deadline = max(until, time.monotonic() + MIN_EVAL_S)
        while time.monotonic() < deadline:
            started = time.thread_time()
            out = np.asarray(self._policy(obs)).reshape(self._episodes, -1)
            for j, env in enumerate(self._envs):
                ts = env.step(self._algorithm.greedy(out[j]))
                obs[j] = (env.reset() if ts.last() else ts).observation
            cpu += time.thread_time() - started
            steps += 1
        return cpu / steps

    @staticmethod
    def _median_cpu(work: Callable[[int], object]) -> float:
        """Median CPU seconds of :data:`PASSES` calls of ``work(pass index)``."""
        times = []
        for i in range(PASSES):
            started = time.thread_time()
            work(i)
            times.append(time.thread_time() - started)
        return float(np.median(times))

    def _learner_state(self) -> dict[str, np.ndarray]:
        """The learner's message authenticated, decoded and mapped to torch keys (the evaluator's and the
        quantizer's first steps)."""
        from actorq.quantize.codec import read_header
        from actorq.quantize.signing import LEARNER_STREAM
        from actorq.roles.quantizer import learner_state

        read_header(self._learner, key=self._key, stream=LEARNER_STREAM)  # authenticated before decoding
        return learner_state(self._config, self._learner, self._policy.spec.image)[1]

    def evaluation_load(self) -> float:
        """CPU seconds to load the learner's message into the evaluator's policy (median of passes)."""
        return self._median_cpu(
            lambda i: self._policy.load_state(self._learner_state(), version=i + 2, learner_step=0)
        )

    def publish(self, precision: str) -> float:
        """CPU seconds of the quantizer's work on one learner message for actors at ``precision`` (median of
        passes): the learner's message loaded, then quantized, encoded, signed and inserted into replay."""
        from actorq.roles.quantizer import encode_policy

        # The wire bits the plan's actors get (plan_measure's variants), so the actors' and this cost agree.
        cfg = replace(
            self._config, **{"actor.precision": precision, "quantizer.comm_bits": AUTO_COMM_BITS[precision]}
        )
        return self._median_cpu(
            lambda i: self._sink.publish(
                encode_policy(cfg, self._learner_state(), version=i + 1, learner_step=0, key=self._key)
            )
        )

    def idle_poll(self) -> float:
        """CPU seconds of one of the quantizer's polls when nothing is new (mean of :data:`POLLS`): the process's
        CPU, since the Reverb client's threads and the in-process server answering it do the work. Call it while
        nothing else of the process works (between the actors' blocks: their server is in the plan's process)."""
        from actorq.replay import LEARNER_WEIGHTS_TABLE, ReverbWeightPublisher, ReverbWeightSubscriber

        ReverbWeightPublisher(self._client, LEARNER_WEIGHTS_TABLE).publish(self._learner)
        source = ReverbWeightSubscriber(
            self._client, LEARNER_WEIGHTS_TABLE, only_new=True
        )  # as the quantizer's
        if source.latest() is None:
            raise RuntimeError("the learner's message just inserted was not found")
        started = time.process_time()
        for _ in range(POLLS):
            if source.latest() is not None:
                raise RuntimeError("an idle poll downloaded a message: it would time a download, not a poll")
        return (time.process_time() - started) / POLLS

    def measure(self, learner_cores: int, until: float, poll_cpu_s: float) -> SideLoads:
        """Both loads on the calling thread's cores (the plan pins it to the learner's): the message loads and the
        quantizer's passes first, then evaluation steps until ``until`` (``time.monotonic()``, the end of the
        actors' block beside them); ``poll_cpu_s`` from :meth:`idle_poll`, timed before the block."""
        load = self.evaluation_load()
        publish = {p: self.publish(p) for p in self._precisions}
        return SideLoads(
            learner_cores=learner_cores,
            eval_load_cpu_s=load,
            eval_step_cpu_s=self.evaluation_step(until),
            eval_steps=self._steps,
            eval_period_s=self._config.evaluator.period_s,
            publish_cpu_s=publish,
            publish_period=self._config.learner.publish_period,
            poll_cpu_s=poll_cpu_s,
            poll_interval_s=self._config.quantizer.poll_interval_s,
        )
