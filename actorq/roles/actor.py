"""Actor role: one CPU actor process running the quantized torch policy and feeding the experience table.

Replay faults: a write that blocks (replay restarting, link cut, rate limiter) is reported by a watchdog after
``replay.rate_limiter_timeout_s`` and resumes by itself when Reverb reconnects; a write that fails makes the actor
reconnect (bounded by ``connect_timeout_s``) and start a new episode. Weight pulls that fail leave the current
weights in place; ``weights_age_s`` in the metrics says how stale they are.

Weights are authenticated with the run's key. The actor's resume record (steps, episodes, and the last installed
weights version, the floor a restarted actor never goes below) is kept on the replay server
(:mod:`actorq.replay.run_state`, signed with the run's key) and in ``RUN_DIR/actor_<i>/resume.json`` (fsynced),
stored at every report and whenever the floor rises, so an actor restarted on another host, without its old run
directory, continues where it was, and one restarted on its own host keeps the larger of the two floors whatever a
client of the replay port did to the record there (a forged or emptied record is rejected and counted among its
``rejected_messages``). Without a trusted record the floor is the newest message it can verify: it installs that.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path

import numpy as np

from actorq.actors.actor import QuantizedActor
from actorq.config import ExperimentConfig
from actorq.config.shards import actor_address, weights_address
from actorq.envs import environment_spec, make_environment
from actorq.quantize.codec import message_size_bound
from actorq.quantize.signing import WeightsKey
from actorq.replay import POLICY_TABLE, ReverbWeightSubscriber, wait_for_server
from actorq.replay.experience import make_adders
from actorq.replay.retry import REPLAY_ERRORS, replay_call
from actorq.replay.run_state_record import Field
from actorq.roles.base import RoleBase
from actorq.roles.policy import build_policy, write_kernel_record
from actorq.roles.watchdog import StallWatchdog
from actorq.status import COUNTER_LIMIT, ActorStatus
from actorq.timers import BREAKDOWN_COMPONENTS, Timers

log = logging.getLogger(__name__)


def env_seed(config: ExperimentConfig, actor_id: int, env_index: int) -> int:
    """Seed of environment ``env_index`` of actor ``actor_id`` (env 0 keeps the one-environment actor's seed)."""
    return config.seed * 1000 + 17 * (actor_id + 1) + 100_003 * env_index


class ActorRole(RoleBase):
    """Runs episodes in ``actor.envs_per_actor`` environments; each ``step()`` steps every one of them once (one
    batched forward); pulls weights every ``actor.update_period`` env steps (counted over all environments)."""

    name = "actor"

    def __init__(
        self,
        config: ExperimentConfig,
        run_dir: str | Path,
        address: str,
        actor_id: int = 0,
        connect_timeout_s: float = 60,
        *,
        weights_key: WeightsKey | None,
    ):
        """``weights_key``: the run's key; None (``--insecure-weights`` only) accepts unsigned weights."""
        super().__init__(config, run_dir, index=actor_id)
        self.actor_id = actor_id
        self._address, self._connect_timeout_s = address, connect_timeout_s
        client, weights_client = self._connect()
        self.num_envs = config.actor.envs_per_actor
        seed = env_seed(config, actor_id, 0)
        self.envs = [
            make_environment(config.env, seed=env_seed(config, actor_id, j)) for j in range(self.num_envs)
        ]
        spec = environment_spec(config.env)
        self.timers = Timers()
        # A restarted or resumed actor continues its own counts and weights floor (from its record on replay,
        # wherever it ran before), so run totals stay right and the rollback guard holds.
        # On the weights shard (shard 0) with the run's other records: one place, whichever shard it writes to.
        previous = self.open_run_state(weights_client, weights_key, connect_timeout_s)
        self.steps = int(previous["steps"]) if previous else 0
        self.episodes = int(previous["episodes"]) if previous else 0
        self._recorded_floor = int(previous["weights_floor"]) if previous else -1
        policy = build_policy(config, batch=self.num_envs)
        self._max_message_bytes = message_size_bound(policy.expected_shapes())
        self.actor = QuantizedActor(
            config,
            policy,
            make_adders(client, config, self.num_envs),
            self._subscriber(weights_client),
            actor_id=actor_id,
            seed=seed,
            action_low=spec.action_low,
            action_high=spec.action_high,
            timers=self.timers,
            key=weights_key,
            on_install=self._installed,
        )
        self.actor.weights.floor = self._recorded_floor
        self.actor.weights.rejected += self.rejected_records  # a forged record counts like a forged message
        if self.actor.weights.floor >= 0:
            log.info(
                "actor %d: restarted; never installs weights below v%d", actor_id, self.actor.weights.floor
            )
        if weights_key is None:
            log.warning(
                "actor %d ACCEPTS UNSIGNED WEIGHTS (--insecure-weights): anyone who can reach replay at %s can "
                "replace the policy it runs",
                actor_id,
                address,
            )
        self._rate = 0.0
        self._returns = [0.0] * self.num_envs
        self.last_return: float | None = None
        self._timesteps: list = [None] * self.num_envs
        self._rate_t, self._rate_steps = time.monotonic(), self.steps
        self._watchdog = StallWatchdog(f"actor {actor_id} replay write", config.replay.rate_limiter_timeout_s)
        self.reconnects = 0
        self._failed_writes = 0  # consecutive: reset by every successful write
        self._retired: queue.SimpleQueue | None = None
        policy = self.actor.policy
        log.info(
            "actor %d: %d env(s), precision=%s %s; exploration (%s) %s",
            actor_id,
            self.num_envs,
            config.actor.precision,
            policy.selection.describe(),
            config.algorithm,
            np.round(self.actor.exploration, 3).tolist(),
        )
        write_kernel_record(self.dir, policy)

    resume_schema = {  # noqa: RUF012  (read-only)
        "steps": Field(np.int64, 0, 0, COUNTER_LIMIT),
        "episodes": Field(np.int64, 0, 0, COUNTER_LIMIT),
        "weights_floor": Field(np.int64, 0, -1, COUNTER_LIMIT),
    }

    def _subscriber(self, client) -> ReverbWeightSubscriber:
        """The policy table's subscriber, capping items at what a message for this network can take."""
        return ReverbWeightSubscriber(client, POLICY_TABLE, only_new=True, max_bytes=self._max_message_bytes)

    def resume_values(self) -> dict[str, np.ndarray]:
        weights = self.actor.weights
        return {
            "steps": np.int64(self.steps),
            "episodes": np.int64(self.episodes),
            "weights_floor": np.int64(max(weights.version, weights.floor)),
        }

    def _installed(self, version: int) -> None:
        """Store the record at once when the floor rises, so a restart never accepts a version below it (a
        reinstall of the same version, as ``actorq bench actors --fresh`` does, stores nothing)."""
        if version > self._recorded_floor:
            self._recorded_floor = version
            self.save_run_state()

    @property
    def env(self):
        """The first environment (the only one unless ``actor.envs_per_actor`` > 1)."""
        return self.envs[0]

    def step(self) -> None:
        """One env step in every environment (starting new episodes where one ended), then maybe a pull."""
        for j, timestep in enumerate(self._timesteps):
            if timestep is None or timestep.last():
                if timestep is not None:
                    self.episodes += 1
                    self.last_return = self._returns[j]
                with self.timers.time("env"):
                    timestep = self._timesteps[j] = self.envs[j].reset()
                self._returns[j] = 0.0
                if not self._write(self.actor.observe_first, timestep, j):
                    return
        if self.num_envs == 1:
            actions = [self.actor.select_action(self._timesteps[0].observation)]
        else:
            actions = self.actor.select_actions(np.stack([ts.observation for ts in self._timesteps]))
        for j, action in enumerate(actions):
            with self.timers.time("env"):
                timestep = self._timesteps[j] = self.envs[j].step(action)
            if not self._write(self.actor.observe, action, timestep, j):
                return
            self._returns[j] += float(timestep.reward or 0.0)
        # Counted once every environment has stepped and written: a loop cut short (a stop while a write is held
        # by the rate limiter, a failed write) counts none of its steps, so the count is whole loops of N.
        self.steps += self.num_envs
        self.actor.update()

    @property
    def episode_return(self) -> float:
        """Return so far of environment 0's current episode."""
        return self._returns[0]

    def _write(self, call, *args) -> bool:
        """One adder call; False (after reconnecting, with a new episode to start) when replay refused it."""
        try:
            with self._watchdog.watch(), replay_call():
                call(*args)
        except REPLAY_ERRORS as exc:  # Reverb's writer raises once its stream to a restarted server is gone
            self._reconnect(exc)
            return False
        self._failed_writes = 0
        return True

    def _connect(self):
        """Clients of this actor's experience shard and of the weights shard (one client when they are one server).

        Raises:
            ReplayUnreachableError: A shard did not answer within ``connect_timeout_s``.
        """
        experience = actor_address(self._address, self.actor_id)
        client = wait_for_server(experience, timeout_s=self._connect_timeout_s)
        weights = weights_address(self._address)
        if weights == experience:
            return client, client
        return client, wait_for_server(weights, timeout_s=self._connect_timeout_s)

    def _reconnect(self, exc: Exception) -> None:
        self._failed_writes += 1
        if self._failed_writes > 3:  # a fresh writer failing too is not a connection problem
            raise RuntimeError(f"actor {self.actor_id}: replay writes fail even after reconnecting") from exc
        log.warning(
            "actor %d: replay write failed (%s: %s); reconnecting and starting a new episode",
            self.actor_id,
            type(exc).__name__,
            (str(exc).splitlines() or [""])[0],
        )
        # raises when the budget runs out
        client, weights_client = self._connect()
        if self._retired is None:
            self._retired = queue.SimpleQueue()
            threading.Thread(
                target=_drop_forever, args=(self._retired,), name="retired-adders", daemon=True
            ).start()
        # Never bound to a local name: the queue holds the last reference, so Acme's flush-on-delete of the broken
        # writer (up to 10 s) runs on the drop thread, not here.
        self._retired.put(
            self.actor.reconnect(
                make_adders(client, self.config, self.num_envs),
                self._subscriber(weights_client),
            )
        )
        self.reconnects += 1
        self._timesteps = [None] * self.num_envs  # every environment starts a new episode

    def _flush_experience(self) -> None:
        adders = self.actor.adders
        if not adders:
            return
        try:
            with replay_call():
                adders[0].writer.flush(timeout_ms=FLUSH_ON_STOP_MS)
        except REPLAY_ERRORS as exc:  # the server is gone or its rate limiter holds them: nothing more to do
            log.info(
                "actor %d: last transitions not confirmed on stop (%s)", self.actor_id, type(exc).__name__
            )

    def write_metrics(self) -> None:
        now = time.monotonic()
        rate = self._rate = (self.steps - self._rate_steps) / max(now - self._rate_t, 1e-9)
        self._rate_t, self._rate_steps = now, self.steps
        totals = self.timers.snapshot()
        row = {
            "step": self.steps,
            "elapsed": time.time() - self.started,
            "steps_per_s": rate,
            "episodes": self.episodes,
            "episode_return": self.last_return,
            "weights_version": self.actor.weights.version,
            "weights_learner_step": self.actor.weights.learner_step,
            "broadcasts_received": self.actor.weights.received,
            "rejected_messages": self.actor.weights.rejected,
            "weights_age_s": self.actor.weights.age_s,
            "pull_failures": self.actor.weights.pull_failures,
            "reconnects": self.reconnects,
            "write_stalls": self._watchdog.stalls,
            "max_write_s": self._watchdog.take_longest(),
            "exploration": self.actor.exploration_level,
        }
        if self.own_process:
            # CPU seconds of this process (acting, pulls, Reverb's client threads); waits on the rate limiter
            # use none, so steps per CPU second is the actor's unthrottled rate on a core of its own.
            row["cpu_s"] = time.process_time()
        for name in BREAKDOWN_COMPONENTS:
            row[f"{name}_s"] = totals.get(name, 0.0)
        self.metrics.write(row)

    def status_record(self) -> ActorStatus:
        weights = self.actor.weights
        totals = self.timers.snapshot()
        return ActorStatus(
            **self.status_fields(),
            step=self.steps,
            episodes=self.episodes,
            steps_per_s=self._rate,
            weights_version=int(weights.version),
            weights_learner_step=int(weights.learner_step),
            episode_return=self.last_return,
            broadcasts_received=int(weights.received),
            rejected_messages=int(weights.rejected),
            breakdown_s={name: float(totals.get(name, 0.0)) for name in BREAKDOWN_COMPONENTS},
        )

    def run(self, stop: threading.Event) -> None:
        log.info("actor %d waiting for its first weights", self.actor_id)
        if not self.actor.wait_for_weights(timeout_s=1800, stop=stop):
            log.warning("actor %d: no weights arrived before stop", self.actor_id)
            self.close()
            return
        log.info(
            "actor %d: weights v%d applied; acting with %s",
            self.actor_id,
            self.actor.weights.version,
            self.actor.policy.selection.describe(),
        )
        write_kernel_record(self.dir, self.actor.policy)  # now with the first-message check
        try:
            super().run(stop)
            self._flush_experience()
        finally:
            self._watchdog.close()
            self.actor.close()
            for env in self.envs:
                env.close()


FLUSH_ON_STOP_MS = 2000
"""On a clean stop, how long an actor waits for replay to confirm its last queued transitions (the rate limiter
may hold them once the learner has stopped: then they are dropped)."""


def _drop_forever(retired: queue.SimpleQueue) -> None:
    while True:
        retired.get()  # the result is dropped at once: the object's __del__ runs on this thread
