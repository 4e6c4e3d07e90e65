"""Typed, frozen experiment configuration, loaded from YAML and overridable on the command line.

Every field carries a docstring (the string literal under it). ``load_config(path, overrides)`` reads a YAML file
whose keys are exactly these dataclass fields (nested sections for nested dataclasses), applies ``section.key=value``
overrides, validates, and returns an :class:`ExperimentConfig`. Unknown keys and invalid values raise
:class:`ConfigError` naming the key and listing what is allowed.

Example YAML::

    algorithm: d4pg
    env: {suite: dmc, task: "cartpole:balance"}
    actor: {precision: int8, num_actors: 2}
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PRECISIONS = ("fp32", "fp16", "int8")
"""Actor inference precisions (``actor.precision`` also takes ``auto``: the fastest that verifies, see KERNELS)."""

KERNELS = {
    "fp32": ("torch", "ort"),
    "fp16": ("fbgemm", "half"),
    "int8": ("ort-u8", "ort-s8r", "ort-s8", "fbgemm", "x86", "onednn", "qnnpack", "intmm"),
}
"""Actor inference kernels per precision (``actorq.actors.kernels`` implements them). ``actor.kernel: auto``
verifies each against fp32 on the machine that runs the actor and uses the fastest that passes."""

COMM_BITS = (32, 16, 8, 4, 2)
"""Bit widths a run may put weights on the wire with (32 = fp32, 16 = fp16, <= 8 = packed affine codes); a subset
of what the codec can carry (:data:`actorq.quantize.header.WIRE_BITS`)."""

ALGORITHMS = ("d4pg", "dqn")
"""The learning algorithms (Acme's D4PG for continuous control, DQN for discrete actions)."""
SUITES = ("dmc", "gym")
LAUNCHERS = ("launchpad", "local", "inprocess")

AUTO_COMM_BITS = {"fp32": 32, "fp16": 16, "int8": 8, "auto": 32}
"""Communication bits used when ``quantizer.comm_bits`` is left unset: the actor precision's natural width
(``auto`` actors may pick fp32, so they get fp32 weights unless comm_bits says otherwise)."""


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message says which key and what is allowed."""


@dataclass(frozen=True)
class EnvConfig:
    suite: str = "dmc"
    """Environment suite: ``dmc`` (dm_control, task ``domain:task``) or ``gym`` (gymnasium id)."""
    task: str = "cartpole:balance"
    """Task name: ``domain:task`` for dmc (e.g. ``walker:stand``), a gymnasium id for gym (e.g. ``CartPole-v1``)."""
    max_episode_steps: int = 0
    """Truncate episodes after this many steps; 0 keeps the environment's own limit."""


@dataclass(frozen=True)
class NetworkConfig:
    policy_layers: tuple[int, ...] = (2048, 2048, 2048)
    """Hidden widths of the policy (D4PG) or Q-network (DQN). The ActorQ paper used 3 x 2048."""
    critic_layers: tuple[int, ...] = (512, 512, 256)
    """Hidden widths of the D4PG critic (learner only). The paper used hidden size 512."""
    vmin: float = -150.0
    """Lower bound of the D4PG distributional critic's support."""
    vmax: float = 150.0
    """Upper bound of the D4PG distributional critic's support."""
    num_atoms: int = 51
    """Number of atoms of the D4PG distributional critic."""


@dataclass(frozen=True)
class ReplayConfig:
    max_size: int = 1_000_000
    """Capacity of the experience table in transitions."""
    min_size: int = 1000
    """Transitions required before the learner may sample (Reverb MinSize / rate-limiter minimum)."""
    samples_per_insert: float = 16.0
    """Target samples per inserted transition (the paper's spi=16); 0 disables the ratio limiter."""
    error_buffer: float = 0.0
    """Tolerance of the samples-per-insert limiter in samples; 0 picks
    max(0.1 * min_size * samples_per_insert, 2 * learner.batch_size, 2 * samples_per_insert) (replay.tables)."""
    prioritized: bool = False
    """Use a prioritized sampler (DQN default) instead of uniform (D4PG default)."""
    priority_exponent: float = 0.6
    """Prioritized replay exponent alpha."""
    importance_sampling_exponent: float = 0.2
    """Prioritized replay importance-sampling exponent beta (DQN learner)."""
    n_step: int = 5
    """N of the n-step transitions written by actors."""
    discount: float = 0.99
    """Per-step discount."""
    port: int = 0
    """Port of the Reverb server; 0 picks a free one."""
    rate_limiter_timeout_s: float = 60.0
    """How long a learner sample or actor insert may block on the rate limiter before it is reported."""


@dataclass(frozen=True)
class LearnerConfig:
    batch_size: int = 256
    """Minibatch size sampled from replay."""
    policy_lr: float = 1e-4
    """D4PG policy learning rate."""
    critic_lr: float = 1e-4
    """D4PG critic learning rate."""
    learning_rate: float = 1e-3
    """DQN learning rate."""
    target_update_period: int = 100
    """Learner steps between target-network updates."""
    publish_period: int = 100
    """Learner steps between pushes of fp32 weights to the quantizer."""
    max_gradient_norm: float = 0.0
    """DQN: clip gradients to this global norm; 0 disables. D4PG ignores it: Acme's D4PG learner always clips
    both networks' gradients at global norm 40 (and dQ/da at 1)."""
    huber_loss_parameter: float = 1.0
    """DQN Huber loss delta."""
    checkpoint_period_s: float = 60.0
    """Seconds between learner checkpoints (Acme checkpointer); 0 disables."""
    max_steps: int = 0
    """Stop the learner after this many steps; 0 = until the experiment ends."""
    onednn: bool = True
    """Run the learner's TensorFlow with oneDNN's fused CPU kernels (``TF_ENABLE_ONEDNN_OPTS=1`` in the learner's
    process, set before TensorFlow loads; TF 2.8 leaves them off). Same fp32 maths; results may differ from the
    default kernels in the last bits. No effect on GPU ops. Measured with ``actorq bench learner``."""
    jit_compile: bool = False
    """Compile the learner's update step (losses, gradients, optimizer, target update) with XLA; sampling stays
    outside the compiled step. Mainly for GPUs; on CPU measure it first with ``actorq bench learner``."""
    jit_optimizer: bool = True
    """Run each optimizer update (Adam on every variable) as one XLA-compiled function: its dozen elementwise
    passes over the weights become one fused pass (3x2048 policy: ~8M weights per pass). Same maths; the
    forward/backward pass keeps TensorFlow's (oneDNN's) kernels. Measured with ``actorq bench learner``."""
    einsum_dense: bool = True
    """Compute the networks' dense-layer products ``x @ w`` as ``tf.einsum`` in the forward pass (gradients stay
    MatMul's): the same fp32 products on a faster oneDNN kernel (1.4x per 2048x2048 layer at batch 64 on an AVX2
    Zen 2). Variables, checkpoints and published weights are unchanged. Measured with ``actorq bench learner``."""
    intra_op_threads: int = 0
    """TensorFlow threads inside one op (matrix multiplies) in the learner; 0 = TensorFlow's default (one per
    core). Set it to the cores the learner owns when other roles share the machine."""
    inter_op_threads: int = 0
    """TensorFlow ops the learner runs concurrently; 0 = TensorFlow's default."""
    prefetch_size: int = 4
    """Batches the learner's replay dataset samples ahead of the update (tf.data prefetch)."""
    sample_parallelism: int = 2
    """Parallel Reverb sample calls of the learner's dataset (more only adds threads on small machines)."""


@dataclass(frozen=True)
class QuantizerConfig:
    comm_bits: int = 0
    """Bits per weight on the wire: 32, 16, 8, 4 or 2; 0 = the actor precision's natural width (32/16/8)."""
    compress: bool = False
    """zlib-compress the message payload."""
    per_channel: bool = True
    """Per-output-channel scales for packed codes (per-tensor when false)."""
    poll_interval_s: float = 0.05
    """Sleep between polls for new learner weights."""


@dataclass(frozen=True)
class ActorConfig:
    precision: str = "int8"
    """Actor inference precision: fp32, fp16, int8, or auto (the fastest precision whose kernel verifies
    against fp32 on the actor's machine; fp32 unless another is >= 3% faster)."""
    num_actors: int = 2
    """Number of actor processes."""
    envs_per_actor: int = 1
    """Environments each actor process steps (1: the paper's setting). Their actions come from one batched
    forward (the kernel is verified and timed at this batch size); each environment explores with its own
    sigma/epsilon (num_actors * envs_per_actor streams on the actors' schedule) and has its own episodes."""
    update_period: int = 1000
    """Env steps between pulls of a new weight message (the paper's model pull frequency)."""
    async_update: bool = False
    """Pull and prepare new weights on a background thread so the env loop never stalls."""
    sigma_max: float = 0.2
    """D4PG: actor i explores with Gaussian sigma_i spread evenly over [0, sigma_max] (paper: 0 to 0.2)."""
    epsilon_min: float = 0.01
    """DQN: smallest per-actor epsilon (actors spread log-uniformly between epsilon_min and epsilon_max)."""
    epsilon_max: float = 0.3
    """DQN: largest per-actor epsilon."""
    threads: int = 1
    """Intra-op threads for torch inference per actor."""
    kernel: str = "auto"
    """Inference kernel (see ``KERNELS``): auto verifies every kernel of the precision against fp32 on the
    actor's machine, times the verified ones and uses the fastest; a named one must verify or the actor stops
    with an error. Empty means auto."""


@dataclass(frozen=True)
class EvaluatorConfig:
    period_s: float = 10.0
    """Seconds between evaluations."""
    episodes: int = 3
    """Greedy episodes per evaluation."""
    evaluate_quantized: bool = False
    """Also evaluate the quantized actor policy, so the reward cost of quantization is visible."""


@dataclass(frozen=True)
class ExperimentConfig:
    algorithm: str = "d4pg"
    """Learning algorithm: d4pg (continuous control) or dqn (discrete)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """The task."""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    """Network sizes."""
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    """Replay tables and rate limiting."""
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    """Learner hyperparameters."""
    quantizer: QuantizerConfig = field(default_factory=QuantizerConfig)
    """Parameter quantizer settings."""
    actor: ActorConfig = field(default_factory=ActorConfig)
    """Actors."""
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    """Evaluator."""
    seed: int = 0
    """Base random seed; each role and actor derives its own from it."""
    max_minutes: float = 10.0
    """Stop the experiment after this many wall-clock minutes; 0 = no limit."""
    max_actor_steps: int = 0
    """Stop after this many environment steps summed over actors; 0 = no limit."""
    target_return: float | None = None
    """Stop once the evaluator's mean return reaches this; null = never stop early."""
    launcher: str = "local"
    """How roles are started: local (subprocesses), launchpad (LOCAL_MULTI_PROCESSING) or inprocess (threads)."""
    log_period_s: float = 5.0
    """Seconds between metric rows written by each role."""
    paper: str = ""
    """What the ActorQ paper used for this task (steps trained, pull period); documentation only."""

    @property
    def comm_bits(self) -> int:
        """The effective communication bit width (resolves 0 to the actor precision's natural width)."""
        return self.quantizer.comm_bits or AUTO_COMM_BITS[self.actor.precision]


# --------------------------------------------------------------------------------------------------------------
# Loading, overriding, validating


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Convert a YAML/CLI value to the annotated type, or raise ConfigError naming the key."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping of {tp.__name__} fields, got {value!r}")
        return _build(tp, value, prefix=key + ".")
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.replace("x", ",").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(_coerce(v, args[0], key) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        try:
            number = float(value) if tp is float else int(str(value).replace("_", ""))
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r}") from None
        return number
    if tp is str:
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return str(value)
    return value


def _build(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    ftypes = _field_types(cls)
    unknown = sorted(set(data) - set(ftypes))
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {', '.join(prefix + k for k in unknown)}; "
            f"valid keys{' under ' + prefix.rstrip('.') if prefix else ''}: {', '.join(sorted(ftypes))}"
        )
    return cls(**{k: _coerce(v, ftypes[k], prefix + k) for k, v in data.items()})


def to_dict(config: Any) -> dict[str, Any]:
    """Plain-dict (JSON/YAML-serialisable) form of a config dataclass."""
    out = dataclasses.asdict(config)

    def fix(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        if isinstance(x, tuple):
            return [fix(v) for v in x]
        return x

    return fix(out)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``section.key=value`` into a key path and a YAML-parsed value."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form section.key=value (e.g. actor.num_actors=4)")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides to a raw config mapping (returns a new mapping)."""
    try:  # a deep copy that also rejects what YAML allows but a config can't hold (dates, sets, bytes)
        data = json.loads(json.dumps(data))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"config values must be numbers, strings, lists or mappings: {exc}") from None
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {part} is not a section")
        node[path[-1]] = value
    return data


def validate(config: ExperimentConfig) -> ExperimentConfig:
    """Check value ranges and choices; raise ConfigError with the allowed values."""

    def choice(key: str, value: Any, allowed: tuple) -> None:
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(map(str, allowed))}")

    def positive(key: str, value: float, allow_zero: bool = False) -> None:
        if value < 0 or (value == 0 and not allow_zero):
            raise ConfigError(f"{key}={value!r} must be {'>= 0' if allow_zero else '> 0'}")

    _check_finite(config)
    choice("algorithm", config.algorithm, ALGORITHMS)
    choice("env.suite", config.env.suite, SUITES)
    choice("actor.precision", config.actor.precision, (*PRECISIONS, "auto"))
    if config.actor.precision == "auto":
        choice("actor.kernel", config.actor.kernel or "auto", ("auto",))
    else:
        choice(
            f"actor.kernel (precision {config.actor.precision})",
            config.actor.kernel or "auto",
            ("auto", *KERNELS[config.actor.precision]),
        )
    choice("launcher", config.launcher, LAUNCHERS)
    if config.quantizer.comm_bits != 0:
        choice("quantizer.comm_bits", config.quantizer.comm_bits, COMM_BITS)
    if config.algorithm == "d4pg" and config.env.suite == "gym" and config.env.task in _DISCRETE_GYM:
        raise ConfigError(f"env.task={config.env.task} has discrete actions: use algorithm: dqn")
    if config.algorithm == "dqn" and config.env.suite == "dmc":
        raise ConfigError("algorithm dqn needs discrete actions; dm_control tasks are continuous: use d4pg")
    positive("actor.num_actors", config.actor.num_actors)
    positive("actor.envs_per_actor", config.actor.envs_per_actor)
    positive("actor.update_period", config.actor.update_period)
    positive("actor.threads", config.actor.threads)
    positive("learner.batch_size", config.learner.batch_size)
    positive("learner.publish_period", config.learner.publish_period)
    positive("learner.intra_op_threads", config.learner.intra_op_threads, allow_zero=True)
    positive("learner.inter_op_threads", config.learner.inter_op_threads, allow_zero=True)
    positive("learner.prefetch_size", config.learner.prefetch_size)
    positive("learner.sample_parallelism", config.learner.sample_parallelism)
    positive("replay.max_size", config.replay.max_size)
    positive("replay.min_size", config.replay.min_size)
    positive("replay.n_step", config.replay.n_step)
    positive("replay.samples_per_insert", config.replay.samples_per_insert, allow_zero=True)
    positive("max_minutes", config.max_minutes, allow_zero=True)
    positive("max_actor_steps", config.max_actor_steps, allow_zero=True)
    for key, (value, allow_zero) in {
        "learner.policy_lr": (config.learner.policy_lr, False),
        "learner.critic_lr": (config.learner.critic_lr, False),
        "learner.learning_rate": (config.learner.learning_rate, False),
        "learner.target_update_period": (config.learner.target_update_period, False),
        "learner.huber_loss_parameter": (config.learner.huber_loss_parameter, False),
        "learner.max_gradient_norm": (config.learner.max_gradient_norm, True),
        "learner.checkpoint_period_s": (config.learner.checkpoint_period_s, True),
        "learner.max_steps": (config.learner.max_steps, True),
        "evaluator.period_s": (config.evaluator.period_s, False),
        "evaluator.episodes": (config.evaluator.episodes, False),
        "actor.sigma_max": (config.actor.sigma_max, True),
        "quantizer.poll_interval_s": (config.quantizer.poll_interval_s, False),
        "replay.rate_limiter_timeout_s": (config.replay.rate_limiter_timeout_s, False),
        "replay.error_buffer": (config.replay.error_buffer, True),
        "replay.priority_exponent": (config.replay.priority_exponent, True),
        "env.max_episode_steps": (config.env.max_episode_steps, True),
        "log_period_s": (config.log_period_s, False),
        "seed": (config.seed, True),
    }.items():
        positive(key, value, allow_zero)
    if not 0 <= config.replay.importance_sampling_exponent <= 1:
        raise ConfigError(
            f"replay.importance_sampling_exponent={config.replay.importance_sampling_exponent} must be in [0, 1]"
        )
    if not 0 <= config.replay.port <= 65535:
        raise ConfigError(
            f"replay.port={config.replay.port} must be 0 (pick a free one) or a port up to 65535"
        )
    if config.network.num_atoms < 2:
        raise ConfigError(f"network.num_atoms={config.network.num_atoms} must be >= 2")
    for key in ("policy_layers", "critic_layers"):
        widths = getattr(config.network, key)
        if not widths or any(w <= 0 for w in widths):
            raise ConfigError(f"network.{key}={list(widths)} must be a non-empty list of positive widths")
    if not 0 < config.replay.discount <= 1:
        raise ConfigError(f"replay.discount={config.replay.discount} must be in (0, 1]")
    if config.replay.min_size > config.replay.max_size:
        raise ConfigError("replay.min_size must not exceed replay.max_size")
    if not 0 <= config.actor.epsilon_min <= config.actor.epsilon_max <= 1:
        raise ConfigError("need 0 <= actor.epsilon_min <= actor.epsilon_max <= 1")
    if config.network.vmin >= config.network.vmax:
        raise ConfigError("network.vmin must be below network.vmax")
    return config


def _check_finite(config: Any, prefix: str = "") -> None:
    """Every float field (nested sections included) must be a finite number: NaN or inf is never a setting."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            _check_finite(value, f"{prefix}{f.name}.")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{prefix}{f.name}={value!r} must be a finite number")


_DISCRETE_GYM = ("CartPole-v1", "MountainCar-v0", "Acrobot-v1")


def config_from_dict(data: dict[str, Any], overrides: list[str] | None = None) -> ExperimentConfig:
    """Build and validate a config from a raw mapping plus overrides."""
    if not isinstance(data, dict):
        raise ConfigError(f"a config must be a mapping of keys to values, got {type(data).__name__}")
    data = apply_overrides(data, overrides or [])
    return validate(_build(ExperimentConfig, data))


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Load a YAML config file, apply ``section.key=value`` overrides, validate.

    Raises:
        ConfigError: missing file, bad YAML, unknown keys, wrong types or out-of-range values.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} not found; the shipped configs are under configs/<algo>/")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    try:
        return config_from_dict(data, overrides)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def replace(config: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` that accepts dotted keys (``replace(cfg, **{"actor.precision": "fp16"})``)."""
    nested: dict[str, dict[str, Any]] = {}
    flat: dict[str, Any] = {}
    for key, value in changes.items():
        head, _, rest = key.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            flat[key] = value
    for head, sub in nested.items():
        flat[head] = replace(getattr(config, head), **sub)
    return (
        validate(dataclasses.replace(config, **flat))
        if isinstance(config, ExperimentConfig)
        else (dataclasses.replace(config, **flat))
    )


def save_config(config: ExperimentConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (every run directory gets one)."""
    Path(path).write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
