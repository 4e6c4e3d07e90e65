"""``actorq bench signing`` measures the real paths on the paper-size message (no timing targets here)."""

from __future__ import annotations

import json

import pytest

from actorq.bench.signing import format_result, run_signing_bench
from actorq.cli import build_parser


def test_signing_bench_reports_every_case(tmp_path):
    out = tmp_path / "signing.json"
    result = run_signing_bench(repeats=2, json_path=str(out))
    assert json.loads(out.read_text()) == result
    assert 8.0e6 < result["message_bytes"] < 9.0e6  # 3x2048 int8: ~25% of the 33.8 MB fp32 message
    for case in (
        "sign",
        "verify",
        "read_header_unsigned",
        "read_header_verified",
        "encode_unsigned",
        "encode_signed",
    ):
        assert result[f"{case}_ms"] > 0 and result[f"{case}_p90_ms"] >= result[f"{case}_ms"]
    # Verifying hashes every byte of the message; a read_header that skipped the tag would cost about nothing.
    assert result["read_header_verified_ms"] > result["read_header_unsigned_ms"]
    text = format_result(result)
    assert "sign " in text and "verify " in text and result["machine"].get("cpu", "?") in text


def test_signing_bench_cli_rejects_bad_repeats():
    parser = build_parser()
    assert parser.parse_args(["bench", "signing", "--repeats", "3"]).repeats == 3
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "signing", "--repeats", "0"])
