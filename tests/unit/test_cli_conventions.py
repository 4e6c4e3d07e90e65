"""One convention across the ``actorq`` commands: a missing input is one ``error:`` line and exit 2, ``--version``,
seconds flags spelled ``-s`` (the old spelling kept as a deprecated alias), help that matches what the parser takes,
and the precisions ``train`` accepts accepted by ``experiment`` too."""

from __future__ import annotations

import pytest

import actorq
from actorq.cli import build_parser, main


@pytest.mark.parametrize("out", [True, False])
def test_report_of_a_missing_directory_is_exit_2(tmp_path, capsys, out):
    where = ["--out", str(tmp_path / "out")] if out else []
    assert main(["report", str(tmp_path / "nonexistent"), *where]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: no such run directory") and not (tmp_path / "out").exists()


def test_version(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"actorq {actorq.__version__}"


def test_role_timeout_is_spelled_with_s_and_the_old_spelling_still_works(capsys):
    parser = build_parser()
    args = parser.parse_args(
        ["role", "actor", "--config", "c.yaml", "--run-dir", "d", "--connect-timeout-s", "7"]
    )
    assert args.connect_timeout == 7.0
    old = parser.parse_args(
        ["role", "actor", "--config", "c.yaml", "--run-dir", "d", "--connect-timeout", "9"]
    )
    assert old.connect_timeout == 9.0
    assert "--connect-timeout is deprecated: use --connect-timeout-s" in capsys.readouterr().err
    train_flags = {a.option_strings[0] for a in _sub(parser, "train")._actions if a.option_strings}
    role_flags = {a.option_strings[0] for a in _sub(parser, "role")._actions if a.option_strings}
    assert "--ray-connect-timeout-s" in train_flags and "--connect-timeout-s" in role_flags


def test_comm_bits_help_offers_what_the_parser_takes():
    parser = build_parser()
    action = next(a for a in _sub(parser, "train")._actions if "--comm-bits" in a.option_strings)
    assert "0 = " in action.help
    assert parser.parse_args(["train", "c.yaml", "--comm-bits", "0"]).comm_bits == 0
    for bits in (32, 16, 8, 4, 2):
        assert str(bits) in action.help
        assert parser.parse_args(["train", "c.yaml", "--comm-bits", str(bits)]).comm_bits == bits


def test_experiment_accepts_the_precisions_train_accepts():
    from actorq.experiments.orchestration import parse_precisions

    train = next(a for a in _sub(build_parser(), "train")._actions if "--precision" in a.option_strings)
    assert parse_precisions(",".join(train.choices)) == list(train.choices)
    assert "auto" in train.choices


def _sub(parser, name):
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices[name]
