"""Fuzzing the ``actorq`` command line: bad arguments exit 2 with an ``error:`` line, never a traceback.

Argument lists are drawn from the CLI's own vocabulary (subcommands, options, choices, config paths, overrides)
mixed with arbitrary text, and run through ``actorq.cli.main`` in this process. What would start work is stubbed:
``train`` resolves and validates its config (the real ``resolve_train_config``) but launches nothing; ``role`` runs
the real ``cmd_role`` and role host (its key rule included) up to the role itself (``build_role`` returns a role
whose loop ends at once; no CPU pinning, environment or signal handlers touch the test process; ``os._exit`` raises
instead of ending it); benchmarks and studies keep their real argument parsing and do nothing after it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import actorq.cli as cli
from actorq.config import save_config
from actorq.roles import host as role_host
from actorq.weights_key import KEY_ENV, ensure_run_key
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]
# CLI words, options, choices (valid and not) and overrides the fuzzer combines.
VOCABULARY = """
        train role tasks bench policy replay learner quantizer actor evaluator --precision int8 fp16 fp32 int4
        --comm-bits 8 3 --actors 0 -1 2 --launcher local ssh --max-minutes nan 1e999 --max-actor-steps
        --target-return --seed x --resume /nonexistent/run --quiet --config --run-dir --replay-address localhost:1
        nohost --port --index --connect-timeout --log-level --help -h -- - actor.num_actors=3 actor.num_actors=-3
        learner.batchsize=3 algorithm=ppo env.task=nope env.task=cartpole:balance = a.b.c=1 actor=1
        network.policy_layers=[] replay.discount=2 seed=!!python/name:os.system --quick --json
        --insecure-weights --weights-key-file
    """
CONFIGS = [str(ROOT / "configs/dqn/gym_cartpole.yaml"), str(ROOT / "configs/d4pg/dmc_cartpole_balance.yaml")]


class _ExitCalledError(Exception):
    """Raised by the stubbed os._exit."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class _NoRole:
    """What the stubbed ``build_role`` builds: a role whose loop returns at once."""

    def run(self, stop) -> None:
        return None


def _validate_only(args) -> int:
    cli.resolve_train_config(args)
    return 0


def _stubbed_parser(real_build_parser):
    """The real parser, with every subcommand but train/role/tasks made a no-op after parsing."""

    def build():
        parser = real_build_parser()
        keep = {cli.cmd_role, cli.cmd_tasks}

        def walk(p):
            for action in p._actions:
                if hasattr(action, "choices") and isinstance(action.choices, dict):
                    for sub in action.choices.values():
                        func = sub._defaults.get("func")
                        if func is cli.cmd_train:
                            sub.set_defaults(func=_validate_only)
                        elif func is not None and func not in keep:
                            sub.set_defaults(func=lambda _args: 0)
                        walk(sub)

        walk(parser)
        return parser

    return build


@pytest.fixture(scope="module")
def resumable(tmp_path_factory) -> str:
    run = tmp_path_factory.mktemp("run")
    save_config(tiny_config("dqn"), run / "config.yaml")
    ensure_run_key(run)  # its RUN_DIR/secrets/weights.key: a role pointed at this run finds its key there
    return str(run)


def _tokens(resumable: str):
    words = st.sampled_from(
        [*VOCABULARY.split(), resumable, *CONFIGS, str(ROOT / "README.md"), str(ROOT / "configs")]
    )
    # Arbitrary text without '/', '.' or NUL, so no value can name a path outside the test's temp directory.
    text = st.text(st.characters(blacklist_characters="/.\x00", blacklist_categories=("Cs",)), max_size=12)
    tail = st.lists(st.one_of(words, words, text), max_size=8)
    # Half the cases start from a valid command head, so they get past argparse into config validation.
    heads = st.sampled_from(
        [
            [],
            ["train", CONFIGS[0]],
            ["train", CONFIGS[1]],
            ["train", "--resume", resumable],
            ["role", "actor", "--config", CONFIGS[0], "--run-dir", "r", "--replay-address", "h:1"],
            ["role", "actor", "--config", CONFIGS[0], "--run-dir", resumable, "--replay-address", "h:1"],
            ["role", "replay", "--config", CONFIGS[1], "--run-dir", "r"],
        ]
    )
    return st.tuples(heads, tail).map(lambda t: t[0] + t[1])


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, "build_parser", _stubbed_parser(cli.build_parser))
        for name in ("pin_role_cpus", "apply_learner_environment", "install_stop_handlers"):
            mp.setattr(role_host, name, lambda *a, **k: None)
        mp.setattr(role_host, "build_role", lambda *a, **k: _NoRole())
        mp.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(_ExitCalledError(code)))
        mp.setattr(logging, "shutdown", lambda: None)
        mp.delenv(KEY_ENV, raising=False)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exc.code if isinstance(exc.code, int) else 1
            except _ExitCalledError as exc:
                code = exc.code
    return code, err.getvalue()


@pytest.fixture(scope="module")
def cwd(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("cwd"))
        yield


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_argument_list_exits_0_or_2_with_an_error_line(cwd, resumable, data):
    argv = data.draw(_tokens(resumable))
    code, err = _run(argv)
    event(f"exit {code}")  # any other exception fails the test: that would be a traceback for a user
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert any(line.startswith(("error:", "actorq")) and "error:" in line for line in err.splitlines()), (
            argv,
            err,
        )
    assert "Traceback" not in err


def test_the_stubs_still_reach_the_real_checks(cwd, resumable):
    """Control: valid commands succeed and each kind of bad input gets its specific message."""
    assert _run(["train", CONFIGS[0], "--actors", "3"])[0] == 0
    assert _run(["train", "--resume", resumable, "--max-actor-steps", "10"])[0] == 0
    role = ["role", "actor", "--config", CONFIGS[0], "--replay-address", "h:1"]
    assert _run([*role, "--run-dir", "r", "--insecure-weights"])[0] == 0
    assert _run([*role, "--run-dir", resumable])[0] == 0  # its key is RUN_DIR/secrets/weights.key
    key = str(Path(resumable) / "secrets" / "weights.key")
    assert _run([*role, "--run-dir", "r", "--weights-key-file", key])[0] == 0
    for argv, needle in (
        ([*role, "--run-dir", "r"], "no weights key for this run"),
        ([*role, "--run-dir", "r", "--weights-key-file", "nokey"], "weights key file nokey does not exist"),
        ([*role, "--run-dir", "r", "--weights-key-file", CONFIGS[0]], "holds 64 hex digits"),
        ([*role, "--run-dir", "r", "--weights-key-file", key, "--insecure-weights"], "contradict"),
        (["train", CONFIGS[0], "learner.batchsize=3"], "unknown config key(s) learner.batchsize"),
        (["train", CONFIGS[0], "--precision", "int4"], "invalid choice: 'int4'"),
        (["train", CONFIGS[0], "env.task=nope"], "env.task='nope' is not a registered Gymnasium id"),
        (["train", "--resume", "/nonexistent/run"], "no config.yaml there"),
        (["role", "actor", "--config", CONFIGS[0], "--run-dir", "r"], "needs --replay-address"),
        (["train", str(ROOT / "README.md")], "not valid YAML"),
    ):
        code, err = _run(argv)
        assert code == 2 and needle in err, (argv, code, err)
