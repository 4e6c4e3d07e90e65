"""The experiment configuration's schema: the allowed choices and one frozen dataclass per YAML section.

Every field carries a docstring (the string literal under it); the YAML keys are exactly these fields (nested
sections for nested dataclasses). Loading and overriding them is :mod:`actorq.config.loading`, validating them
:mod:`actorq.config.validation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PRECISIONS = ("fp32", "fp16", "int8")
"""Actor inference precisions (``actor.precision`` also takes ``auto``: the fastest that verifies, see KERNELS)."""

BYTES_PER_WEIGHT = {"fp32": 4, "fp16": 2, "int8": 1}
"""Bytes of one weight at each actor precision: what a batch-1 forward reads per weight."""

KERNELS = {
    "fp32": ("torch", "ort"),
    "fp16": ("fbgemm", "half"),
    "int8": ("ort-u8", "ort-s8r", "ort-s8r-f32conv", "ort-s8", "fbgemm", "x86", "onednn", "qnnpack", "intmm"),
}
"""Actor inference kernels per precision (``actorq.actors.kernels`` implements them). ``actor.kernel: auto``
verifies each against fp32 on the machine that runs the actor and uses the fastest that passes."""

COMM_BITS = (32, 16, 8, 4, 2)
"""Bit widths a run may put weights on the wire with (32 = fp32, 16 = fp16, <= 8 = packed affine codes); a subset
of what the codec can carry (:data:`actorq.quantize.header.WIRE_BITS`)."""

SUITES = ("dmc", "gym")
LAUNCHERS = ("launchpad", "local", "inprocess", "ray")

AUTO_COMM_BITS = {"fp32": 32, "fp16": 16, "int8": 8, "auto": 32}
"""Communication bits used when ``quantizer.comm_bits`` is left unset: the actor precision's natural width
(``auto`` actors may pick fp32, so they get fp32 weights unless comm_bits says otherwise)."""


@dataclass(frozen=True)
class EnvConfig:
    suite: str = "dmc"
    """Environment suite: ``dmc`` (dm_control, task ``domain:task``) or ``gym`` (Gymnasium)."""
    task: str = "cartpole:balance"
    """Task name. dmc: ``domain:task`` of dm_control's suite (e.g. ``walker:stand``). gym: any registered Gymnasium
    id (e.g. ``Hopper-v4``, ``ALE/Pong-v5``, ``MinAtar/Breakout-v1``; ``actorq tasks`` lists them), or
    ``module:Class`` naming a ``gymnasium.Env`` class or factory of your own (imported in every role's process), or
    ``module:id`` for an id that module registers. The task's spaces decide which algorithms take it
    (:mod:`actorq.envs`)."""
    max_episode_steps: int = 0
    """Truncate episodes after this many steps; 0 keeps the environment's own limit."""
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make`` (or your class or factory), e.g. ``{continuous: true}``; gym only."""
    wrappers: tuple[str, ...] = ()
    """Standard Gymnasium wrappers applied in this order, by name: ``flatten``, ``grayscale``, ``resize:HxW``,
    ``frame_stack:N``, ``clip_reward`` (training only), ``clip_action``, ``rescale_action``, ``time_aware``
    (:mod:`actorq.envs.wrappers`); gym only. ALE games get the standard Atari preprocessing without naming any."""


@dataclass(frozen=True)
class NetworkConfig:
    policy_layers: tuple[int, ...] = (2048, 2048, 2048)
    """Hidden widths of the actors' policy (a policy or Q-network, per algorithm). The ActorQ paper used 3 x 2048.
    An algorithm's other networks (a critic) are sized in its own section. With a conv torso these are the dense
    layers after it (the Nature DQN network: [512])."""
    torso: str = "auto"
    """What reads the observation before the dense layers (``actorq.algorithms.torso``): ``mlp`` (the flattened
    observation), ``nature_cnn`` (the Nature DQN convolutions, for image observations: rank 3, HWC or CHW, uint8
    frames divided by 255 inside the network; algorithms with a conv torso only: dqn), or ``auto`` (nature_cnn
    for image observations when the algorithm has it, mlp otherwise)."""


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
    """Use a prioritized sampler instead of uniform (an algorithm's learner may write priorities back: DQN's
    does)."""
    priority_exponent: float = 0.6
    """Prioritized replay exponent alpha."""
    n_step: int = 5
    """N of the n-step transitions written by actors."""
    discount: float = 0.99
    """Per-step discount."""
    port: int = 0
    """Port of the Reverb server; 0 picks a free one."""
    rate_limiter_timeout_s: float = 60.0
    """How long a learner sample or actor insert may block on the rate limiter before it is reported."""
    shards: int = 1
    """Reverb servers holding experience (>= 1, at most ``actor.num_actors``): actor i writes to shard
    i % shards, the learner samples every shard, weights travel through shard 0 only; the table settings above
    apply to each shard. The rules: :mod:`actorq.config.shards`. Launchers local, inprocess and ray."""


@dataclass(frozen=True)
class LearnerConfig:
    batch_size: int = 256
    """Minibatch size sampled from replay."""
    target_update_period: int = 100
    """Learner steps between target-network updates."""
    publish_period: int = 100
    """Learner steps between pushes of fp32 weights to the quantizer."""
    checkpoint_period_s: float = 60.0
    """Seconds between learner checkpoints (Acme checkpointer); 0 disables."""
    max_steps: int = 0
    """Stop the learner after this many steps, which ends the run (exit reason ``max_learner_steps``); 0 = until
    another budget or the target ends the run."""
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
    """Greedy episodes per evaluation, played together in as many environments with one batched policy forward per
    step (its kernel verified at that batch)."""
    each_version_once: bool = False
    """Evaluate each learner weight version at most once: a period in which the learner published nothing new is
    skipped (one small ``server_info`` call instead of an evaluation). With the period alone, a slow learner's
    weights are evaluated several times over and a fast one's once, so the k evaluations the threshold smooths span
    one weight version in one run and k in another (measured on the Zen 3's Acrobot cell at 1 env: fp32 2.2-2.8
    evaluations per version, int8 1.0-1.1; fp32 reached -95 twice on three evaluations of a single version), which
    makes the threshold easier for the run whose learner steps more slowly. With it, and a period shorter than the
    learner's publication interval, every run is evaluated once per weight version, at the same learner steps."""
    evaluate_quantized: bool = False
    """Also evaluate the quantized actor policy, so the reward cost of quantization is visible, and measure how often
    it would act differently from fp32 on the states the fp32 episodes visit (the same learner step's weights;
    ``quantized_agreement`` or ``quantized_action_error`` in ``evaluator/metrics.csv``). Costs a quantization and one
    quantized forward per evaluation step on the evaluator's cores."""


@dataclass(frozen=True)
class RayConfig:
    """Where the ``ray`` launcher runs roles (only read by ``launcher: ray``)."""

    address: str = ""
    """Ray cluster to join (``HOST:PORT`` of its GCS, or ``auto``); empty: ``$RAY_ADDRESS``, else a local cluster
    started for the run and stopped at its end. ``actorq train --ray-address`` sets it."""
    learner_gpus: float = 0.0
    """GPUs the learner's Ray actor asks for (0: CPU only; a fraction shares a GPU)."""
    learner_resource: str = "learner_host"
    """Custom resource marking the nodes for the learner, replay, quantizer and evaluator; used when some node of
    the cluster advertises it (``ray start --resources '{"learner_host": 1}'``), else Ray places them freely."""
    actor_resource: str = "actor_host"
    """Custom resource marking the nodes for actors (each actor asks ``actor.threads`` CPUs); used when some node
    advertises it, else Ray places actors freely."""
    replay_resource: str = "replay_host"
    """Custom resource marking the nodes for replay shards (``replay.shards``): when some node advertises it, each
    shard asks 1 of it, so a node started with ``ray start --resources '{"replay_host": 1}'`` holds one shard (and
    too few units for the shards is an error before any role starts); else every shard goes where the learner
    goes (``learner_resource``)."""
    max_restarts: int = 5
    """Times Ray restarts a dead actor, quantizer or evaluator (on any node that fits) before the run fails."""
    temp_dir: str = ""
    """Ray's session directory for a local cluster the run starts; empty: Ray's default (/tmp/ray)."""
    bind: str = "127.0.0.1"
    """IP address a local cluster the run starts listens on (its node IP). 127.0.0.1, the default, keeps every Ray
    server on loopback; for any other address Ray 2.48 advertises it but listens on every interface (Ray has no
    authentication: firewall the others). Not used when joining a cluster. ``actorq train --ray-bind`` sets it."""
    connect_timeout_s: float = 15.0
    """Seconds a run waits for the Ray head at ``ray.address`` to answer before it fails (exit 2) naming why:
    connection refused, timed out, or not a Ray head. ``actorq train --ray-connect-timeout-s`` sets it."""


@dataclass(frozen=True)
class AffinityConfig:
    """CPU cores each role's process may run on: its own affinity (``sched_setaffinity``), set when the role's
    process starts, before TensorFlow or torch size their thread pools. Empty = any core (the default). Ignored, with
    a warning, where roles share one process (the in-process launcher)."""

    replay: tuple[int, ...] = ()
    """Cores of the replay server's process; with ``replay.shards`` > 1, shard k runs on the one core
    ``replay[k % len(replay)]``."""
    learner: tuple[int, ...] = ()
    """Cores of the learner's process, e.g. [0] to give it a core of its own as on a GPU box."""
    quantizer: tuple[int, ...] = ()
    """Cores of the parameter quantizer's process."""
    actor: tuple[int, ...] = ()
    """Cores every actor process may run on (shared by all actors)."""
    evaluator: tuple[int, ...] = ()
    """Cores of the evaluator's process."""


TRACKERS = ("wandb", "mlflow")
"""Experiment trackers a run can also send its metrics to (``tracking.backend``; optional extras)."""


@dataclass(frozen=True)
class TrackingConfig:
    """An experiment tracker the run also sends its metrics, config and summary to (the CSVs and TensorBoard files
    are always written). The launcher sends each role's metrics rows as they are written: the same scalars as
    TensorBoard, named ``<role>/<column>`` and stepped by the role's ``step``."""

    backend: str = ""
    """wandb or mlflow (``pip install ".[track]"``); empty: no tracker."""
    project: str = "actorq"
    """The W&B project, or the MLflow experiment."""
    online: bool = False
    """wandb: upload while the run goes on (needs ``wandb login``); false writes an offline run under
    RUN_DIR/wandb to upload later with ``wandb sync``. mlflow: ignored (it logs to ``MLFLOW_TRACKING_URI``,
    default a file store in RUN_DIR/mlruns)."""


@dataclass(frozen=True)
class ExperimentConfig:
    algorithm: str = "d4pg"
    """Learning algorithm, a name registered in ``actorq.algorithms`` (built in or a plugin): e.g. d4pg
    (continuous control) or dqn (discrete actions)."""
    settings: Any = None
    """The algorithm's own section (its ``Algorithm.section`` dataclass, checked by its ``validate``). In YAML it is
    the section named after the algorithm (``d4pg: {critic_lr: 3e-4}``); left out, the algorithm's defaults."""
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
    ray: RayConfig = field(default_factory=RayConfig)
    """The ray launcher's cluster and placement."""
    affinity: AffinityConfig = field(default_factory=AffinityConfig)
    """CPU cores per role (empty: any)."""
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    """An experiment tracker (W&B, MLflow) besides the CSVs and TensorBoard."""
    seed: int = 0
    """Base random seed: the learner's initial networks (TensorFlow's global seed), and the seed each role, actor and
    environment derives its own from."""
    max_minutes: float = 10.0
    """Stop the experiment after this many wall-clock minutes; 0 = no limit."""
    max_actor_steps: int = 0
    """Stop after this many environment steps summed over actors; 0 = no limit."""
    target_return: float | None = None
    """Stop once the run reaches this return by the report's rule (the trailing mean of
    ``actorq.target.DEFAULT_WINDOW`` evaluations made after the learner's first update); the report then takes
    it as the task's reward threshold, fixed before the runs instead of derived from the best fp32 run. null = never
    stop early."""
    launcher: str = "local"
    """How roles are started: local (subprocesses), launchpad (LOCAL_MULTI_PROCESSING), inprocess (threads) or
    ray (Ray actors on a cluster, see ``ray``)."""
    log_period_s: float = 5.0
    """Seconds between metric rows written by each role."""
    paper: str = ""
    """What the ActorQ paper used for this task (steps trained, pull period); documentation only."""

    @property
    def comm_bits(self) -> int:
        """The effective communication bit width (resolves 0 to the actor precision's natural width)."""
        return self.quantizer.comm_bits or AUTO_COMM_BITS[self.actor.precision]


def error_buffer(config: ExperimentConfig) -> float:
    """The samples-per-insert limiter's tolerance (Acme's D4PG rule when the config leaves it 0).

    Acme uses ``min_replay_size * 0.1 * samples_per_insert``; we also keep it at least two learner batches, so a
    learner step is never refused for being a few samples over the ratio, and at least
    ``2 * samples_per_insert``, above Reverb's floor of ``samples_per_insert`` (a tolerance window of less than
    ``2 * samples_per_insert`` can block inserts and samples for good).

    Defined here, not beside the Reverb table, because reports read the limiter's bounds too (without Reverb):
    ``min_diff = samples_per_insert * min_size - buffer`` and ``max_diff = ... + buffer``.
    """
    if config.replay.error_buffer > 0:
        return config.replay.error_buffer
    spi = config.replay.samples_per_insert
    return max(config.replay.min_size * 0.1 * spi, 2.0 * config.learner.batch_size, 2.0 * spi)
