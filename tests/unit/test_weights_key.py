"""The run's weights key on disk and how roles get it: created 0600 in a 0700 directory, found in a fixed order,
refused when missing (unless --insecure-weights), never shown; and what a restarted role remembers of versions."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from actorq.actors.actor import QuantizedActor
from actorq.actors.policy import ActorPolicy
from actorq.launchers.topology import role_command, topology
from actorq.networks.mapping import torch_state_shapes
from actorq.quantize.codec import encode_message
from actorq.roles import build_role
from actorq.roles.version_record import VersionRecord
from actorq.weights_key import (
    KEY_ENV,
    KEY_ROLES,
    WeightsKeyError,
    describe,
    ensure_run_key,
    load_key_file,
    resolve_weights_key,
    run_key_path,
)
from tests.conftest import tiny_config
from tests.messages import TEST_KEY


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_launcher_key_is_created_private_and_reused(tmp_path):
    old = os.umask(0)  # even a wide-open umask must not widen the key's permissions
    try:
        path = ensure_run_key(tmp_path / "run")
    finally:
        os.umask(old)
    assert path == run_key_path(tmp_path / "run") == tmp_path / "run" / "secrets" / "weights.key"
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    text = path.read_text()
    assert len(text.strip()) == 64 and int(text, 16) >= 0
    # --resume (or any later launch into this run directory) keeps the key, and tightens loosened permissions.
    os.chmod(path, 0o644)
    os.chmod(path.parent, 0o755)
    assert ensure_run_key(tmp_path / "run") == path and path.read_text() == text
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    assert ensure_run_key(tmp_path / "other").read_text() != text  # a new run, a new key


def test_existing_bad_key_file_is_an_error_that_does_not_quote_it(tmp_path):
    path = run_key_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("secret-looking-but-not-hex")
    with pytest.raises(WeightsKeyError, match="64 hex digits") as err:
        ensure_run_key(tmp_path)
    assert "secret-looking" not in str(err.value)
    with pytest.raises(WeightsKeyError, match="does not exist"):
        load_key_file(tmp_path / "nope.key")


def test_roles_find_their_key_in_order_or_refuse(tmp_path):
    run = tmp_path / "run"
    explicit, env_file = tmp_path / "explicit.key", tmp_path / "env.key"
    keys = {}
    for name, path in (("run", ensure_run_key(run)), ("explicit", explicit), ("env", env_file)):
        if name != "run":
            ensure_run_key(tmp_path / name)
            run_key_path(tmp_path / name).rename(path)
        keys[name] = load_key_file(path)
    env = {KEY_ENV: str(env_file)}
    assert resolve_weights_key(run, explicit, environ=env) == keys["explicit"]
    assert resolve_weights_key(run, None, environ=env) == keys["env"]
    assert resolve_weights_key(run, None, environ={}) == keys["run"]
    assert resolve_weights_key(run, None, insecure=True, environ=env) is None
    with pytest.raises(WeightsKeyError, match="no weights key.*--weights-key-file.*ACTORQ_WEIGHTS_KEY_FILE"):
        resolve_weights_key(tmp_path / "empty", None, environ={})
    with pytest.raises(WeightsKeyError, match="contradict"):
        resolve_weights_key(run, explicit, insecure=True, environ={})


def test_summary_description_names_the_run_never_the_key():
    described = describe(TEST_KEY)
    assert described == {"scheme": "hmac-sha256", "run_id": TEST_KEY.run_id_hex}
    assert TEST_KEY.secret.hex() not in str(described)
    assert describe(None)["scheme"].startswith("none")


def test_roles_that_touch_weights_refuse_to_start_without_a_key(tmp_path):
    config = tiny_config("dqn")
    for role in KEY_ROLES:
        # Refused before connecting anywhere (the address does not exist).
        with pytest.raises(WeightsKeyError, match=f"role {role} needs the run's weights key"):
            build_role(role, config, tmp_path, address="localhost:1")


def test_launched_roles_get_the_key_file_or_the_insecure_flag(tmp_path):
    key_file = ensure_run_key(tmp_path)
    for spec in topology(tiny_config("dqn")):
        signed = role_command(spec, "c.yaml", tmp_path, "h:1", 1, weights_key_file=key_file)
        insecure = role_command(spec, "c.yaml", tmp_path, "h:1", 1, weights_key_file=None)
        if spec.role == "replay":
            assert "--weights-key-file" not in signed and "--insecure-weights" not in insecure
        else:
            assert signed[signed.index("--weights-key-file") + 1] == str(key_file)
            assert "--insecure-weights" in insecure and "--weights-key-file" not in insecure
        assert key_file.read_text().strip() not in " ".join(
            signed
        )  # a path on the command line, never the key


def test_version_record_belongs_to_one_run(tmp_path):
    record = VersionRecord(tmp_path / "v.json", "aaaa")
    assert record.read() == -1
    record.write(7, learner_step=300)
    assert (record.read(), record.read("learner_step")) == (7, 300)
    assert VersionRecord(tmp_path / "v.json", "bbbb").read() == -1  # another run (another key): not ours
    for garbage in ("{", "[]", '{"run_id": "aaaa", "version": true}', '{"run_id": "aaaa"}'):
        (tmp_path / "v.json").write_text(garbage)
        assert record.read() == -1
    assert [p.name for p in tmp_path.iterdir()] == ["v.json"]


OBS, OUT, LAYERS = 4, 2, (16,)


class _Table:
    def __init__(self) -> None:
        self.buffer = None

    def latest(self, timeout_s=None):
        return self.buffer


def _signed(version: int, key=TEST_KEY, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shapes = torch_state_shapes("dqn", OBS, OUT, LAYERS)
    state = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    return encode_message(
        state, version=version, learner_step=version, precision="int8", comm_bits=8, key=key
    )


def _actor(record: VersionRecord, key=TEST_KEY) -> tuple[QuantizedActor, _Table]:
    table = _Table()
    policy = ActorPolicy("dqn", OBS, OUT, LAYERS, precision="int8")
    actor = QuantizedActor(tiny_config("dqn"), policy, None, table, key=key, on_install=record.write)
    actor.weights.floor = record.read()
    return actor, table


def test_restarted_actor_never_goes_below_its_last_installed_version(tmp_path):
    record = VersionRecord(tmp_path / "weights_version.json", TEST_KEY.run_id_hex)
    first, table = _actor(record)
    for version in (3, 5):
        table.buffer = _signed(version, seed=version)
        first.update(wait=True)
    assert first.weights.version == 5 and record.read() == 5

    # The process restarts; an attacker has put back the (authentic) v3 message it captured earlier.
    restarted, table = _actor(record)
    table.buffer = _signed(3, seed=3)
    assert not restarted.wait_for_weights(timeout_s=0.5)
    assert restarted.weights.version == -1 and restarted.weights.rejected >= 1
    assert restarted.weights.last_error.startswith("UnauthenticatedMessageError: stale message v3")
    table.buffer = _signed(5, seed=5)  # the version it had: allowed again after a restart
    assert restarted.wait_for_weights(timeout_s=5) and restarted.weights.version == 5
    table.buffer = _signed(4, seed=4)
    restarted.update(wait=True)
    assert restarted.weights.version == 5 and "stale message v4" in restarted.weights.last_error


def test_without_a_key_unsigned_weights_are_accepted_and_with_one_refused(tmp_path):
    unsigned = _signed(1, key=None)
    insecure, table = _actor(VersionRecord(tmp_path / "a.json", ""), key=None)
    table.buffer = unsigned
    insecure.update(wait=True)
    assert insecure.weights.version == 1
    secure, table = _actor(VersionRecord(tmp_path / "b.json", TEST_KEY.run_id_hex))
    table.buffer = unsigned
    secure.update(wait=True)
    assert secure.weights.version == -1 and "unsigned" in secure.weights.last_error


@pytest.mark.parametrize(
    ("mode", "level", "says"),
    [(0o600, None, None), (0o440, "INFO", "readable by group"), (0o644, "WARNING", "open to every user")],
)
def test_key_file_permissions_are_reported_by_who_else_can_read_it(tmp_path, caplog, mode, level, says):
    path = tmp_path / "weights.key"
    path.write_text("ab" * 32)
    os.chmod(path, mode)
    with caplog.at_level("INFO", logger="actorq.weights_key"):
        load_key_file(path)
    found = [r for r in caplog.records if str(path) in r.getMessage()]
    if level is None:
        assert not found
    else:
        assert [r.levelname for r in found] == [level] and says in found[0].getMessage()
