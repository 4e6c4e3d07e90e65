"""The algorithm registry: every algorithm provides every piece, and nothing outside ``actorq/algorithms`` asks
which algorithm it is by name (``tests/softmax_dqn.py``, a test-only third algorithm, goes through the same checks).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from actorq import algorithms
from actorq.algorithms.base import Algorithm, Ref
from actorq.config import PRECISIONS, ConfigError, config_from_dict, load_config, to_dict
from actorq.envs import UnsupportedSpaceError, check_task
from actorq.networks.mapping import mapping_table, torch_state_shapes
from tests import softmax_dqn
from tests.conftest import tiny_config
from tests.unit.test_import_rules import references

ROOT = Path(__file__).resolve().parents[2]
OBS, LAYERS = 5, (8, 6)


@pytest.fixture
def stub():
    """The test-only Softmax DQN, registered for the test's duration."""
    algo = algorithms.register(softmax_dqn.SoftmaxDQN())
    try:
        yield algo
    finally:
        algorithms.unregister(algo.name)


def _config(name: str):
    """A small config of the algorithm: tiny networks for D4PG and DQN, the first one it ships otherwise."""
    if name == softmax_dqn.NAME:
        return config_from_dict(softmax_dqn.CONFIG)
    if name in ("d4pg", "dqn"):
        return tiny_config(name)
    shipped = sorted(ROOT.glob(f"configs/{name}/*.yaml"))
    assert shipped, f"algorithm {name} ships no config under configs/{name}/"
    return load_config(shipped[0])


def _module_source(module: str) -> str:
    path = ROOT / Path(*module.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


def _fields_without_docstring(cls: type) -> list[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    missing = []
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.AnnAssign):
            documented = isinstance(after, ast.Expr) and isinstance(
                getattr(after, "value", None), ast.Constant
            )
            if not documented:
                missing.append(node.target.id)
    return missing


@pytest.fixture(params=[*algorithms.names(), softmax_dqn.NAME])  # every built-in (its package) and the plugin
def algo(request) -> Algorithm:
    if request.param == softmax_dqn.NAME:
        request.getfixturevalue("stub")
    return algorithms.get(request.param)


def test_every_algorithm_declares_its_kind_settings_network_and_bounds(algo):
    assert algorithms.get(algo.name) is algo and isinstance(algo.discrete, bool) and algo.summary
    config = _config(algo.name)
    assert dataclasses.is_dataclass(algo.section)
    assert isinstance(algo.settings(config), algo.section)
    assert _fields_without_docstring(algo.section) == []
    assert set(algo.verification_bounds) == set(PRECISIONS)
    assert all(0 < b < 1 for b in algo.verification_bounds.values())


def test_every_reference_resolves_on_its_own_side_of_the_frameworks(algo):
    for ref in (algo.learner_builder, algo.tf_networks, algo.torch_policy):
        assert isinstance(ref, Ref) and callable(ref.load()), ref
    tf_side = {algo.learner_builder.module, algo.tf_networks.module}
    for module in tf_side:  # resolved in the learner, which never loads torch
        assert "torch" not in {n.split(".")[0] for _, n in references(_module_source(module))}, module
    torch_roots = {n.split(".")[0] for _, n in references(_module_source(algo.torch_policy.module))}
    assert not torch_roots & {"tensorflow", "sonnet", "acme"}, algo.torch_policy


def test_the_torch_policy_has_exactly_the_mapped_weights(algo):
    out_dim = 3
    model = algo.torch_policy.load()(OBS, out_dim, LAYERS, -np.ones(out_dim), np.ones(out_dim))
    state = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert state == torch_state_shapes(algo.name, OBS, out_dim, LAYERS)
    assert sorted(key for _, key, _ in mapping_table(algo.name, LAYERS)) == sorted(state)
    assert all(
        name.startswith(algo.network.tf_scope + "/") for name, _, _ in mapping_table(algo.name, LAYERS)
    )


def test_exploration_acts_per_stream_and_evaluation_acts_greedily(algo):
    config = _config(algo.name)
    levels = algo.exploration_levels([0, 1, 2], 3, config)
    assert levels.shape == (3,) and len(set(levels.tolist())) == 3
    rng = np.random.default_rng(0)
    outputs = rng.uniform(-0.5, 0.5, size=(3, 4)).astype(np.float32)
    low, high = -np.ones(4, np.float32), np.ones(4, np.float32)
    actions = algo.explore(outputs, rng, levels, low, high)
    assert len(actions) == 3
    if algo.discrete:
        assert all(isinstance(a, np.int32) and 0 <= a < 4 for a in actions)
        assert algo.greedy(outputs[1]) == int(np.argmax(outputs[1]))
    else:
        assert all(a.dtype == np.float32 and a.shape == (4,) and np.all(np.abs(a) <= 1) for a in actions)
        np.testing.assert_array_equal(algo.greedy(outputs[1]), outputs[1])


def test_verification_accepts_fp32_and_rejects_an_error_beyond_the_bound(algo):
    ref = np.random.default_rng(1).uniform(-1, 1, size=(64, 3))
    action_range = np.full(3, 2.0)
    for precision, bound in algo.verification_bounds.items():
        assert algo.verify(ref.copy(), ref, precision, action_range).ok, precision
        wrong = ref + 3 * bound * np.abs(ref).max() * action_range.max()
        result = algo.verify(wrong, ref, precision, action_range)
        assert not result.ok and result.error > bound and f"{bound:g}" in result.detail, (precision, result)


def test_a_config_names_a_registered_algorithm_of_the_tasks_kind(stub):
    registered = ", ".join(algorithms.names())
    assert registered.startswith("d4pg, ") and registered.endswith(", dqn, softmax_dqn")
    with pytest.raises(ConfigError, match=rf"algorithm=.*'r2d2'.*choose one of: {registered}"):
        config_from_dict({**softmax_dqn.CONFIG, "algorithm": "r2d2"})
    with pytest.raises(ConfigError, match="continuous .* actions and algorithm softmax_dqn learns discrete"):
        config_from_dict({**softmax_dqn.CONFIG, "env": {"suite": "dmc", "task": "cartpole:balance"}})
    without_section = {k: v for k, v in softmax_dqn.CONFIG.items() if k != softmax_dqn.NAME}
    # A Gymnasium task's spaces are read when the launching process makes it once (check_task), not on loading.
    with pytest.raises(
        UnsupportedSpaceError, match=r"Discrete\(2\) .* taking Discrete actions .*: dqn, softmax_dqn"
    ):
        check_task(config_from_dict({**without_section, "algorithm": "d4pg"}))
    config = config_from_dict(softmax_dqn.CONFIG)
    assert config.algorithm == "softmax_dqn" and config.settings.temperature_max == 0.5


def test_an_algorithms_section_is_its_own_and_checked_only_by_it(stub):
    config = config_from_dict(softmax_dqn.CONFIG)
    assert stub.settings(config) == softmax_dqn.SoftmaxDQNSettings(temperature_max=0.5)
    # Its own check, in its own words; and its section in the YAML written for role processes.
    with pytest.raises(ConfigError, match="softmax_dqn.temperature_max=0.0 must be > 0"):
        config_from_dict(softmax_dqn.CONFIG, ["softmax_dqn.temperature_max=0"])
    assert config_from_dict(to_dict(config)) == config
    assert to_dict(config)["softmax_dqn"]["temperature_max"] == 0.5 and "settings" not in to_dict(config)
    # Another algorithm's section is an unknown key, not silently ignored.
    with pytest.raises(ConfigError, match="unknown config key.*d4pg"):
        config_from_dict({**softmax_dqn.CONFIG, "d4pg": {"critic_lr": 1e-3}})


def test_d4pg_checks_run_on_d4pg_only_and_old_configs_still_load():
    # A config written before algorithms had sections: every algorithm's fields in the shared sections.
    old = {
        "env": {"suite": "gym", "task": "CartPole-v1"},
        "network": {"policy_layers": [8], "critic_layers": [], "vmin": 9.0, "vmax": 1.0, "num_atoms": 1},
        "learner": {"policy_lr": 0.5, "learning_rate": 0.25},
        "actor": {"sigma_max": 0.1, "epsilon_min": 0.05, "epsilon_max": 0.2},
    }
    dqn = config_from_dict({**old, "algorithm": "dqn"})  # D4PG's invalid critic is no concern of DQN's
    assert dqn.settings == algorithms.get("dqn").section(
        learning_rate=0.25, epsilon_min=0.05, epsilon_max=0.2
    )
    d4pg = {**old, "algorithm": "d4pg", "env": {"suite": "dmc", "task": "cartpole:balance"}}
    with pytest.raises(ConfigError, match=r"d4pg.critic_layers=\[\] must be a non-empty list"):
        config_from_dict(d4pg)
    with pytest.raises(ConfigError, match="d4pg.vmin=9.0 must be below d4pg.vmax=1.0"):
        config_from_dict(d4pg, ["network.critic_layers=[4]", "network.num_atoms=5"])
    fixed = config_from_dict(d4pg, ["network.critic_layers=[4]", "network.num_atoms=5", "network.vmin=-1"])
    assert (
        fixed.settings.policy_lr == 0.5 and fixed.settings.critic_layers == (4,) and fixed.settings.vmin == -1
    )


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(ROOT.glob("configs/*/*.yaml")) if p.parent.name != "experiments"],  # grid files there
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_shipped_configs_keep_their_settings_in_their_algorithms_section(path):
    raw = yaml.safe_load(path.read_text())
    algo = algorithms.get(raw["algorithm"])
    legacy = {key.split(".")[1] for key in algo.legacy_keys}
    assert all(not (set(raw.get(s) or {}) & legacy) for s in ("network", "learner", "actor", "replay")), path
    assert isinstance(load_config(path).settings, algo.section)


@pytest.mark.subprocess
def test_built_in_algorithms_are_the_packages_and_plugins_come_by_entry_point(tmp_path):
    packages = sorted(p.parent.name for p in (ROOT / "actorq" / "algorithms").glob("*/__init__.py"))
    assert [n for n in algorithms.names() if n in packages] == packages
    for name in packages:  # a built-in's name is its package's
        assert algorithms.get(name).name == name
    dist = tmp_path / "softmax_dqn_plugin-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: softmax-dqn-plugin\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{algorithms.ENTRY_POINT_GROUP}]\n{softmax_dqn.ENTRY_POINT}\nbroken = tests.no_such_module:ALGORITHM\n"
    )
    code = (
        "import actorq.algorithms as a\nprint(','.join(a.names()))\n"
        "try:\n    a.get('broken')\nexcept a.UnknownAlgorithmError as e:\n    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    names, error = out.stdout.splitlines()
    assert names.split(",") == [*packages, "softmax_dqn"]
    assert (
        "'broken' is not one of" in error
        and "ModuleNotFoundError" in error
        and "tests.no_such_module" in error
    )


def test_registry_refuses_a_taken_name_and_names_the_registered_ones():
    with pytest.raises(ValueError, match="already registered"):
        algorithms.register(algorithms.get("dqn"))
    with pytest.raises(
        algorithms.UnknownAlgorithmError, match=rf"'r2d2' is not one of {re.escape(str(algorithms.names()))}"
    ):
        algorithms.get("r2d2")
    with pytest.raises(ImportError, match="actorq.networks.torch_nets has no 'nope'"):
        Ref("actorq.networks.torch_nets", "nope").load()


def _algorithm_name_compares(source: str) -> list[int]:
    """Lines comparing something called ``algorithm`` (name or attribute) with a string constant. (``algo`` in
    ``actorq/studies`` is a stable-baselines3 algorithm, not one of ours.)"""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        named = any(
            (isinstance(o, ast.Name) and o.id == "algorithm")
            or (isinstance(o, ast.Attribute) and o.attr == "algorithm")
            for o in operands
        )
        if named and any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
            lines.append(node.lineno)
    return lines


ALLOWED = {
    # The Acme baseline runs Acme's own D4PG agent, which exists for D4PG only: it refuses other configs.
    "actorq/experiments/acme_baseline.py",
}


def test_nothing_outside_the_algorithm_modules_compares_an_algorithm_name():
    found = {}
    for path in sorted((ROOT / "actorq").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("actorq/algorithms/") or rel in ALLOWED:
            continue
        if lines := _algorithm_name_compares(path.read_text()):
            found[rel] = lines
    assert found == {}, "ask actorq.algorithms.get(config.algorithm) instead of comparing its name"


def test_the_name_compare_scan_finds_a_branch():
    assert _algorithm_name_compares('if config.algorithm == "dqn":\n    pass\n') == [1]
    assert _algorithm_name_compares('x = "d4pg" != spec.algorithm\n') == [1]
    assert _algorithm_name_compares("x = config.algorithm == other\n") == []


def test_dqn_int8_check_bounds_decisive_probes_and_reports_near_ties():
    from actorq.algorithms.dqn import BOUNDS, verify_q_values

    # Rows 0-2 decisive (gap 1 of max |Q| 2), rows 3-4 near ties (gap 0.01).
    ref = np.array([[2.0, 1.0], [1.0, 2.0], [2.0, 1.0], [1.0, 1.01], [1.01, 1.0]], np.float32)
    near_ties_flipped = ref.copy()
    near_ties_flipped[3:] = ref[3:, ::-1]
    ok = verify_q_values(near_ties_flipped, ref, "int8", BOUNDS)
    assert ok.ok and "100.0% of 3 decisive probes" in ok.detail and "60.0% of all 5" in ok.detail
    decisive_flipped = ref.copy()
    decisive_flipped[0] = [1.45, 1.55]  # a decisive flip; the Q bound widened so agreement alone decides
    bad = verify_q_values(decisive_flipped, ref, "int8", {**BOUNDS, "int8": 1.0})
    assert not bad.ok and "66.7% of 3 decisive probes" in bad.detail
