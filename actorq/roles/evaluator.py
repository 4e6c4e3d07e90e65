"""Evaluator role: greedy episodes with the learner's fp32 policy (and optionally the quantized actor policy).

The fp32 policy is the learner's own function: its weights come from the learner-weights table through the same
explicit TF-to-torch mapping the quantizer uses (parity-tested against TF). Each row records the return against
wall time, learner steps and total actor steps (the experience table's insert count).

Both kinds of weights are authenticated with the run's key before they are decoded; a rejected message is logged
and counted (``rejected_messages``), and the evaluation waits for the next period. Learner weights older (by
version) than the ones last evaluated are skipped: a replayed older message, or a replay table restored from its
checkpoint.

With ``evaluator.evaluate_quantized`` it also plays the broadcast quantized policy (``quantized_return``) and, on
every state its fp32 episodes visit, compares the fp32 action with that of the same weights quantized by the
quantizer's rule (:mod:`actorq.roles.agreement`): how often quantized actors would act differently, the behaviour
change that reward per env step can hide or show.

A restarted evaluator keeps the run's evaluations so far: its history is its resume record on the replay server
(:mod:`actorq.replay.run_state`, signed with the run's key) and in ``RUN_DIR/evaluator/resume.json``, stored after
every evaluation, so it holds on whichever host it restarts. The supervisor stops a run on these evaluations, so a
history is trusted only when it verifies and is one the run could have made: finite returns within
:data:`~actorq.status.RETURN_LIMIT`, counters below :data:`~actorq.status.COUNTER_LIMIT`, columns of one length,
times in order and no more evaluations than one per ``evaluator.period_s`` (and one per start) since the first.
Anything else in the tables (junk in a weight table, a forged record) is rejected and counted, never fatal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from actorq import algorithms
from actorq.config import ExperimentConfig
from actorq.config.shards import split_addresses, weights_address
from actorq.envs import make_environment
from actorq.metrics import evaluation_row
from actorq.quantize.codec import WeightMessageError, decode_message, message_size_bound, read_header
from actorq.quantize.signing import LEARNER_STREAM, POLICY_STREAM, WeightsKey
from actorq.replay import (
    LEARNER_WEIGHTS_TABLE,
    POLICY_TABLE,
    ReverbWeightSubscriber,
    experience_inserts,
    wait_for_server,
)
from actorq.replay.retry import ReplayOutage
from actorq.replay.run_state_record import Field, RejectedRecordError
from actorq.roles.agreement import ActionAgreement
from actorq.roles.base import RoleBase
from actorq.roles.policy import build_policy, greedy_episodes
from actorq.roles.quantizer import encode_policy, learner_state
from actorq.status import COUNTER_LIMIT, RETURN_LIMIT, Evaluation, EvaluatorStatus
from actorq.timers import Periodic

log = logging.getLogger(__name__)

MAX_EVALUATIONS = 1_000_000
"""The most evaluations a resume record may hold (a month of evaluations every 3 s)."""
EXTRA_EVALUATIONS = 1000
"""Evaluations a history may hold beyond one per period: each start of the evaluator evaluates at once."""
CLOCK_SKEW_S = 300.0
"""How far in the future (by this host's clock) an evaluation time may be: another host's clock may run ahead."""


class EvaluatorRole(RoleBase):
    """Every ``evaluator.period_s`` seconds, evaluates the newest learner weights for ``evaluator.episodes`` (with
    ``evaluator.each_version_once``, only when they are new since the last evaluation)."""

    name = "evaluator"

    def __init__(
        self,
        config: ExperimentConfig,
        run_dir: str | Path,
        address: str,
        connect_timeout_s: float = 60,
        *,
        weights_key: WeightsKey | None,
    ):
        """``weights_key``: the run's key; None (``--insecure-weights`` only) accepts unsigned weights."""
        super().__init__(config, run_dir)
        self._key = weights_key
        if weights_key is None:
            log.warning("evaluator ACCEPTS UNSIGNED WEIGHTS (--insecure-weights)")
        self._client = wait_for_server(weights_address(address), timeout_s=connect_timeout_s)
        # Evaluations are tagged with the inserts over every shard (one per env step the actors wrote).
        self._shard_clients = [
            self._client if a == weights_address(address) else wait_for_server(a, timeout_s=connect_timeout_s)
            for a in split_addresses(address)
        ]
        # One environment per evaluation episode, stepped together with one batched forward (the kernel is
        # verified and timed at that batch): an evaluation costs one policy forward per step, not one per episode.
        episodes = config.evaluator.episodes
        self._envs = [
            make_environment(config.env, seed=config.seed * 1000 + 999 + 7919 * j, evaluation=True)
            for j in range(episodes)
        ]
        self._fp32 = build_policy(config, precision="fp32", batch=episodes)
        cap = message_size_bound(self._fp32.expected_shapes())  # fp32: the widest either table carries
        # each_version_once: a period with no new learner weights since the last evaluation evaluates nothing.
        self._learner_sub = ReverbWeightSubscriber(
            self._client, LEARNER_WEIGHTS_TABLE, only_new=config.evaluator.each_version_once, max_bytes=cap
        )
        self._policy_sub = ReverbWeightSubscriber(self._client, POLICY_TABLE, max_bytes=cap)
        self._quantized = (
            build_policy(config, batch=episodes) if config.evaluator.evaluate_quantized else None
        )
        self._algorithm = algorithms.get(config.algorithm)  # its evaluation rule acts in greedy episodes
        # With the quantized policy: on the states the fp32 episodes visit, how often it would act differently.
        self._agreement = (
            ActionAgreement(
                self._quantized, self._algorithm, self._fp32.spec.action_low, self._fp32.spec.action_high
            )
            if self._quantized is not None
            else None
        )
        self._due = Periodic(config.evaluator.period_s)
        self._first = True
        self.evaluations = 0
        # Replay restarting or unreachable: evaluate at the next period instead (never gives up on its own).
        self._outage = ReplayOutage("evaluator", budget_s=None)
        self.rejected = 0
        self._learner_version = -1  # of the last learner weights evaluated
        self.best_return: float | None = None
        previous = self.open_run_state(self._client, weights_key, connect_timeout_s)
        self.rejected += self.rejected_records  # a forged record counts like a forged message
        self.history: list[Evaluation] = history_from_record(previous) if previous else []

    resume_schema = {  # noqa: RUF012  (read-only)
        "time": Field(np.float64, 1, 0, 1e11, max_len=MAX_EVALUATIONS),
        "learner_step": Field(np.int64, 1, 0, COUNTER_LIMIT, max_len=MAX_EVALUATIONS),
        "actor_steps": Field(np.int64, 1, 0, COUNTER_LIMIT, max_len=MAX_EVALUATIONS),
        "eval_return": Field(np.float64, 1, -RETURN_LIMIT, RETURN_LIMIT, max_len=MAX_EVALUATIONS),
    }

    def check_record(self, record: dict[str, np.ndarray]) -> None:
        """A history the run could have made: columns of one length, times in order and not in the future, at
        most one evaluation per ``evaluator.period_s`` since the first (plus :data:`EXTRA_EVALUATIONS`, the
        immediate evaluation of each start)."""
        lengths = {name: len(column) for name, column in record.items()}
        if len(set(lengths.values())) > 1:
            raise RejectedRecordError(f"evaluator history columns of different lengths {lengths}")
        times = record["time"]
        if not len(times):
            return
        if np.any(np.diff(times) < 0) or times[-1] > time.time() + CLOCK_SKEW_S:
            raise RejectedRecordError("evaluation times out of order or in the future")
        possible = (times[-1] - times[0]) / self.config.evaluator.period_s + 1 + EXTRA_EVALUATIONS
        if len(times) > possible:
            raise RejectedRecordError(
                f"{len(times)} evaluations in {times[-1] - times[0]:.0f} s: more than one per "
                f"evaluator.period_s ({self.config.evaluator.period_s:g} s)"
            )

    def merge_records(self, on_replay, local):
        """The longer history (the other is a prefix of it, or a replay restored from an older checkpoint)."""
        return on_replay if len(on_replay["time"]) >= len(local["time"]) else local

    def resume_values(self) -> dict[str, np.ndarray]:
        return {
            name: np.array([getattr(e, name) for e in self.history], dtype=spec.dtype)
            for name, spec in self.resume_schema.items()
        }

    @property
    def replay_errors(self) -> int:
        """Failed replay calls so far."""
        return self._outage.errors

    def step(self) -> None:
        if not (self._first or self._due.due()):
            time.sleep(0.1)
            return
        try:
            answered, polled = self._outage.attempt(
                lambda: (
                    self._learner_sub.latest(),
                    sum(experience_inserts(c)[0] for c in self._shard_clients),
                )
            )
        except WeightMessageError as exc:  # not a message at all: junk in the learner table
            self._first = False
            self.rejected += 1
            log.error("evaluator rejected learner weights: %s: %s", type(exc).__name__, exc)
            return
        if not answered:
            return
        buf, inserts = polled
        if buf is None:
            time.sleep(0.5)
            return
        self._first = False
        try:
            loaded = self._load_fp32(buf)
            if loaded is None:
                return
        except WeightMessageError as exc:
            self.rejected += 1
            log.error("evaluator rejected learner weights: %s: %s", type(exc).__name__, exc)
            return
        learner_step, state = loaded
        observe = self._same_step_agreement(state, learner_step)
        started = time.monotonic()
        returns = greedy_episodes(self._envs, self._fp32, self._algorithm, observe=observe)
        row = evaluation_row(
            learner_step, time.time() - self.started, inserts, returns, time.monotonic() - started
        )
        if self._agreement is not None:
            row.update(self._agreement.row())
        if self._quantized is not None:
            row.update(self._evaluate_quantized())
        row["rejected_messages"] = self.rejected
        self.best_return = (
            row["eval_return"] if self.best_return is None else max(self.best_return, row["eval_return"])
        )
        self.evaluations += 1
        self.metrics.write(row)
        self.history.append(
            Evaluation(
                time=time.time(),
                learner_step=int(learner_step),
                actor_steps=int(inserts),
                eval_return=float(row["eval_return"]),
            )
        )
        self.publish_status()  # at once: the supervisor stops on the target from this record
        log.info(
            "eval @ learner step %d, actor steps %d: return %.1f", learner_step, inserts, row["eval_return"]
        )

    def status_record(self) -> EvaluatorStatus:
        last = self.history[-1].learner_step if self.history else 0
        return EvaluatorStatus(
            **self.status_fields(),
            step=last,
            evaluations=tuple(self.history),
            rejected_messages=self.rejected,
        )

    def _load_fp32(self, buf) -> tuple[int, dict[str, np.ndarray]] | None:
        """Load authentic learner weights; their learner step and torch-keyed state, or None when they are older
        than the last ones."""
        header = read_header(buf, key=self._key, stream=LEARNER_STREAM)  # authenticated before decoding
        if header.version < self._learner_version:
            log.info(
                "evaluator: learner weights v%d older than v%d evaluated; skipped",
                header.version,
                self._learner_version,
            )
            return None
        message, state = learner_state(self.config, buf, self._fp32.spec.image)
        self._fp32.load_state(state, version=message.version, learner_step=message.learner_step)
        self._learner_version = message.version
        return message.learner_step, state

    def _same_step_agreement(
        self, state: dict[str, np.ndarray], learner_step: int
    ) -> Callable[[np.ndarray, np.ndarray, list[int]], None] | None:
        """The fp32 episodes' observe hook comparing actions with the quantized policy of the same weights, or None.

        The weights are quantized here by the quantizer's own rule (:func:`encode_policy`), unsigned because the
        message never leaves this process: the broadcast policy may be a learner step or more behind, and a
        comparison across steps would count learning as quantization error.
        """
        if self._agreement is None:
            return None
        message = encode_policy(self.config, state, version=0, learner_step=learner_step, key=None)
        self._quantized.apply(decode_message(message, expected=self._quantized.expected_shapes()))
        self._agreement.reset()
        return self._agreement.observe

    def _evaluate_quantized(self) -> dict[str, float | None]:
        """The broadcast quantized policy's greedy return; None values when there is none to evaluate (the keys
        are always there, so the metrics header has them from the first row, which may come before any broadcast)."""
        none: dict[str, float | None] = {"quantized_return": None, "quantized_learner_step": None}
        # Replay restarting: skip the quantized half of this evaluation (no back-off: the fp32 half is done).
        try:
            answered, buf = self._outage.attempt(self._policy_sub.latest, wait=False)
            if not answered or buf is None:
                return none
            header = read_header(buf, key=self._key, stream=POLICY_STREAM)  # authenticated before decoding
            self._quantized.apply(decode_message(buf, expected=self._quantized.expected_shapes()))
        except WeightMessageError as exc:
            self.rejected += 1
            log.error("evaluator rejected quantized weights: %s: %s", type(exc).__name__, exc)
            return none
        returns = greedy_episodes(self._envs, self._quantized, self._algorithm)
        return {"quantized_return": float(np.mean(returns)), "quantized_learner_step": header.learner_step}

    def run(self, stop: threading.Event) -> None:
        try:
            super().run(stop)
        finally:
            for env in self._envs:
                env.close()


def history_from_record(record: dict[str, np.ndarray]) -> list[Evaluation]:
    """The evaluations in a resume record (its columns, checked by :meth:`EvaluatorRole.check_record`)."""
    return [
        Evaluation(time=float(t), learner_step=int(step), actor_steps=int(inserts), eval_return=float(ret))
        for t, step, inserts, ret in zip(
            record["time"], record["learner_step"], record["actor_steps"], record["eval_return"], strict=True
        )
    ]
