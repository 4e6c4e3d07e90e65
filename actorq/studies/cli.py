"""``actorq`` subcommands of the QuaRL study toolkit.

The lead's ``actorq/cli.py`` calls :func:`add_subcommands` with its top-level subparsers and
:func:`add_bench_parser` with the subparsers of ``actorq bench``. Each command sets ``func`` to a callable that
takes the parsed Namespace and returns an exit code. ``python -m actorq.studies.cli ...`` runs them standalone.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from actorq.studies import qat_cli
from actorq.studies.cli_args import ALGO_CHOICES
from actorq.studies.cli_args import bit_width as _bit_width
from actorq.studies.cli_args import check_env as _check_env
from actorq.studies.cli_args import fail as _fail
from actorq.studies.cli_args import names as _names
from actorq.studies.cli_args import threads as _threads
from actorq.usage import positive_int, run_command

logger = logging.getLogger(__name__)

LOAD_ALGO_CHOICES = [*ALGO_CHOICES, "qrdqn"]  # loading also takes sb3-contrib's QR-DQN (when installed)


def cmd_zoo_train(a: argparse.Namespace) -> int:
    from actorq.studies import zoo

    _check_env(a.env)
    _threads(a.threads)
    _, meta = zoo.train(a.algo, a.env, a.steps, out=a.out, seed=a.seed, eval_episodes=a.eval_episodes)
    print(json.dumps(meta, indent=2))
    return 0


def _load(a: argparse.Namespace) -> tuple[object, dict]:
    from actorq.studies import safe_pickle, sb3_zip, zoo, zoo_env

    try:
        return zoo.load_policy(a.policy, algo=a.algo, env_id=getattr(a, "env", None))
    except (
        FileNotFoundError, ValueError, sb3_zip.ZipLoadError, zoo_env.ZooConfigError, safe_pickle.UnsafePickleError,
    ) as e:  # fmt: skip
        raise _fail(e) from None


def _title(meta: dict) -> str:
    env = meta["env"]
    ran = f" (run on {env.env_id})" if env.source_id else ""
    return f"{meta['algo'].upper()} {meta['env_id']}{ran}"


def _fidelity(meta: dict, res: dict, out: str | None) -> None:
    """Print (and save) our fp32 return beside the zoo's final evaluation, when the agent has one."""
    from actorq.studies import fidelity

    if not meta.get("evaluations"):
        return
    fp32 = res["rows"][0]
    check = fidelity.compare(
        fp32["mean"], fp32["std"], fp32["episodes"], fidelity.zoo_final_evaluation(meta["evaluations"]),
        meta["env"].env_id, meta["env"].source_id, meta.get("num_timesteps"),
    )  # fmt: skip
    print(fidelity.describe(check))
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "fidelity.json").write_text(json.dumps(check, indent=2))


def cmd_ptq(a: argparse.Namespace) -> int:
    from actorq.studies import ptq

    try:  # before loading the policy: a typo in --bits must not cost a load
        precisions = ptq.parse_precisions(a.bits)
    except ValueError as e:
        raise _fail(f"--bits {a.bits!r}: {e}") from None
    try:
        cfg = ptq.PtqConfig(
            precisions=precisions, episodes=a.episodes, seeds=a.seeds,
            per_channel_linear=a.per_channel_linear, quantize_activations=a.activations, act_bits=a.act_bits,
            calib_steps=a.calib_steps, n_envs=a.n_envs, max_episode_steps=a.max_episode_steps,
            obs_bits=a.obs_bits,
        )  # fmt: skip
    except ValueError as e:
        raise _fail(f"--obs-bits: {e}") from None
    _threads(a.threads)
    model, meta = _load(a)
    res = ptq.run_ptq(model, meta["env"], cfg, out=a.out, title=_title(meta))
    print(ptq.table_markdown(res))
    print(ptq.layers_markdown(res))
    _fidelity(meta, res, a.out)
    return 0


def cmd_weights(a: argparse.Namespace) -> int:
    from actorq.studies import weights
    from actorq.studies.torch_fake_quant import QuantScheme

    try:
        scheme = QuantScheme.parse(a.bits, per_channel_linear=a.per_channel_linear)
    except ValueError as e:
        raise _fail(f"--bits {a.bits!r}: {e}") from None
    model, meta = _load(a)
    res = weights.run_weights(model, scheme, a.out, title=_title(meta))
    print(weights.table_markdown(res))
    return 0


def cmd_mixed_precision(a: argparse.Namespace) -> int:
    from actorq.studies import mixed_precision as mp

    sizes = {k: mp.SIZES[k] for k in _names(a.sizes, tuple(mp.SIZES), "--sizes")}
    _check_env(a.env)
    res = mp.run_mixed_precision(
        a.env, sizes=sizes, steps=a.steps, seed=a.seed, eval_every=a.eval_every, out=a.out, threads=a.threads
    )
    print(mp.table_markdown(res))
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from actorq.studies import report

    a.input = a.input or a.input_flag or "reports/studies"
    if not Path(a.input).is_dir():
        raise _fail(f"{a.input}: no such directory; give the folder the study commands wrote (--out) into")
    if a.zoo_table2:
        from actorq.studies.zoo_table import table2_markdown

        text = table2_markdown(a.input, a.out)
    else:
        text = report.render(a.input, a.out)
    shown = a.print or (a.zoo_table2 and not a.out)
    print(text.rstrip("\n") if shown else f"wrote {a.out or Path(a.input) / 'README.md'}")
    return 0


def cmd_bench_deploy(a: argparse.Namespace) -> int:
    from actorq.studies import deploy

    backends = _names(a.backends, deploy.BACKENDS, "--backends")
    if a.policy:
        from actorq.studies import deploy_policy

        model, meta = _load(a)
        try:
            res = deploy_policy.run_policy_bench(
                model, meta, a.out, backends=backends, iters=a.iters, models_dir=a.models_dir
            )
        except ValueError as e:  # an agent whose action path is not a plain MLP
            raise _fail(e) from None
        print(deploy_policy.table_markdown(res))
        return 0
    res = deploy.run_bench(
        a.out, policies=_names(a.policies, tuple(deploy.POLICIES), "--policies"), backends=backends, obs_dim=a.obs_dim,
        iters=a.iters, memory_limit=not a.no_memory_limit, models_dir=a.models_dir,
    )  # fmt: skip
    print(deploy.table_markdown(res))
    return 0


def _policy_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument(
        "--policy", required=required, default=None,
        help="run directory (model.zip + meta.json), RL Baselines3 Zoo agent directory (<env>.zip, config.yml, "
        "vecnormalize.pkl, evaluations.npz) or an SB3 .zip; read without unpickling",
    )  # fmt: skip
    p.add_argument(
        "--algo",
        choices=LOAD_ALGO_CHOICES,
        default=None,
        help="algorithm (detected from the zip when omitted)",
    )


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``zoo``, ``ptq``, ``qat``, ``weights``, ``mixed-precision`` and ``studies-report``."""
    zoo_p = subparsers.add_parser("zoo", help="train stable-baselines3 policies to study")
    zsub = zoo_p.add_subparsers(dest="zoo_command", required=True)
    t = zsub.add_parser("train", help="train and save a policy (model.zip + meta.json)")
    t.add_argument("--algo", choices=ALGO_CHOICES, required=True, help="stable-baselines3 algorithm")
    t.add_argument(
        "--env", required=True, help="gymnasium id: CartPole-v1, Hopper-v5, PongNoFrameskip-v4, ..."
    )
    t.add_argument("--steps", type=positive_int, required=True, help="environment steps to train for")
    t.add_argument("--out", required=True, help="directory for model.zip and meta.json")
    t.add_argument("--seed", type=int, default=0, help="training seed")
    t.add_argument(
        "--eval-episodes",
        type=positive_int,
        default=10,
        help="episodes of the final evaluation in meta.json",
    )
    t.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    t.set_defaults(func=cmd_zoo_train)

    p = subparsers.add_parser("ptq", help="post-training quantization sweep (table + sweet-spot plot)")
    _policy_args(p)
    p.add_argument(
        "--env", default=None,
        help="env the policy was trained on (default: meta.json / zoo file name); a gym id that is not installed "
        "maps to the nearest installed version with the same spaces (Hopper-v3 -> Hopper-v4)",
    )  # fmt: skip
    p.add_argument("--bits", default="fp32,fp16,8,7,6,5,4,3,2", help="comma list: fp32,fp16,bf16,2..16")
    p.add_argument("--episodes", type=positive_int, default=100, help="episodes per evaluation seed")
    p.add_argument("--seeds", type=positive_int, default=3, help="evaluation seeds")
    p.add_argument(
        "--per-channel-linear", action="store_true", help="per-output-row scales for Linear weights"
    )
    p.add_argument("--activations", action="store_true", help="also quantize every layer's input activation")
    p.add_argument(
        "--act-bits", type=_bit_width, default=None, help="activation bits (default: the weight bits)"
    )
    p.add_argument(
        "--obs-bits", type=_bit_width, default=None,
        help="input bits of the layers that read the observation (with --activations; default: the activation "
        "bits); integer deployments commonly keep the network's input at 8",
    )  # fmt: skip
    p.add_argument(
        "--calib-steps", type=positive_int, default=1000, help="recorded observations for calibration"
    )
    p.add_argument(
        "--n-envs", type=positive_int, default=4, help="env copies stepped together during evaluation"
    )
    p.add_argument(
        "--max-episode-steps",
        type=positive_int,
        default=None,
        help="cap on episode length (default: the env's)",
    )
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    p.add_argument("--out", required=True, help="directory for the table, plots and JSON")
    p.set_defaults(func=cmd_ptq)

    qat_cli.add_parsers(subparsers)

    w = subparsers.add_parser("weights", help="weight histograms with the quantization grid + stats")
    _policy_args(w)
    w.add_argument(
        "--env", default=None, help="env the policy was trained on (default: meta.json / zoo file name)"
    )
    w.add_argument("--bits", default="8", help="precision whose grid is drawn: fp16, bf16 or 2..16 bits")
    w.add_argument(
        "--per-channel-linear", action="store_true", help="per-output-row scales for Linear weights"
    )
    w.add_argument("--out", required=True, help="directory for the histograms and stats")
    w.set_defaults(func=cmd_weights)

    m = subparsers.add_parser("mixed-precision", help="fp32 vs mixed precision DQN training (Policy A/B/C)")
    m.add_argument("--env", default="CartPole-v1", help="gymnasium id to train on")
    m.add_argument("--steps", type=positive_int, default=20_000, help="environment steps per training run")
    m.add_argument("--sizes", default="A,B,C", help="subset of A (64x64), B (256x256), C (1024x1024)")
    m.add_argument("--eval-every", type=positive_int, default=2000, help="steps between evaluations")
    m.add_argument("--seed", type=int, default=0, help="training seed")
    m.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    m.add_argument("--out", required=True, help="directory for the curves, table and JSON")
    m.set_defaults(func=cmd_mixed_precision)

    r = subparsers.add_parser("studies-report", help="render all study outputs under a directory to markdown")
    r.add_argument(
        "input",
        nargs="?",
        default=None,
        help="folder the study commands wrote into (default reports/studies)",
    )
    r.add_argument("--in", dest="input_flag", help=argparse.SUPPRESS)  # the old spelling, kept working
    r.add_argument("--out", default=None, help="default: <in>/README.md")
    r.add_argument("--print", action="store_true", help="print the markdown instead of saying where it went")
    r.add_argument(
        "--zoo-table2",
        action="store_true",
        help="the QuaRL Table 2 analogue over agent folders (printed without --out)",
    )
    r.set_defaults(func=cmd_report)


def add_bench_parser(bench_subparsers: argparse._SubParsersAction) -> None:
    """Register ``deploy`` under ``actorq bench``."""
    d = bench_subparsers.add_parser("deploy", help="fp32 vs int8 policy latency / memory / size (Table 4/6)")
    d.add_argument("--out", default="reports/studies/deploy", help="directory for deploy.json/csv/md")
    d.add_argument(
        "--policies",
        default="I,II,III",
        help="I (3x64), II (3x256), III (4096-512-1024); ignored with --policy",
    )
    d.add_argument("--backends", default="onnx,torchscript", help="comma list of onnx, torchscript")
    d.add_argument(
        "--obs-dim",
        type=positive_int,
        default=512,
        help="observation size of policies I-III (Air Learning's)",
    )
    d.add_argument("--iters", type=positive_int, default=2000, help="timed inferences per model")
    d.add_argument("--no-memory-limit", action="store_true", help="skip the RLIMIT_AS runs")
    d.add_argument("--models-dir", default=None, help="keep the exported models here (default: temporary)")
    _policy_args(d, required=False)
    d.add_argument(
        "--env", default=None, help="with --policy: the env it was trained on (default: zoo file name)"
    )
    d.set_defaults(func=cmd_bench_deploy)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point with the same commands (``bench deploy`` included)."""
    parser = argparse.ArgumentParser(prog="actorq-studies", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_subcommands(sub)
    bench = sub.add_parser("bench", help="benchmarks")
    add_bench_parser(bench.add_subparsers(dest="bench_command", required=True))
    return run_command(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
