"""The learner's maths is Acme's whichever way the step runs: Acme's own fused ``_step`` with its plain optimizer,
or ours (sample taken outside, Acme's step body on it, the optimizer's apply XLA-compiled, the dense layers'
forward products as einsum), or the whole update
XLA-compiled. The same steps on the same fixed batches from the same weights give the same variables and losses,
up to float rounding."""

from __future__ import annotations

import numpy as np
import pytest

from actorq.config import replace
from tests.conftest import tiny_config

pytestmark = pytest.mark.reverb


def _learners(configs, server):
    from actorq.bench.learner import prefill
    from actorq.envs import make_environment
    from actorq.learners import make_learner
    from actorq.replay.tables import environment_spec_for

    prefill(server.localhost_client(), configs[0], configs[0].replay.min_size + 50)
    env = make_environment(configs[0].env)
    spec = environment_spec_for(env)
    env.close()
    return [make_learner(config, spec, f"localhost:{server.port}") for config in configs]


def _state(learner) -> list:
    """Every variable a step changes: networks, targets, optimizer slots, step counter (in a fixed order)."""
    inner = learner._learner
    if hasattr(inner, "_policy_network"):
        modules = [
            inner._policy_network,
            inner._critic_network,
            inner._target_policy_network,
            inner._target_critic_network,
            inner._policy_optimizer,
            inner._critic_optimizer,
        ]
    else:
        modules = [inner._network, inner._target_network, inner._optimizer]
    return [v for m in modules for v in m.variables] + [inner._num_steps]


def _dataset(batches: list):
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        ds = ds.concatenate(tf.data.Dataset.from_tensors(batch))
    return ds


def _copy_state(src, dst) -> None:
    for a, b in zip(_state(src), _state(dst), strict=True):
        b.assign(a)


@pytest.mark.parametrize("algorithm", ["d4pg", "dqn"])
def test_split_and_compiled_updates_match_acmes_step(reverb_server, algorithm):
    from actorq.learners import make_update_function

    acme = tiny_config(
        algorithm,
        **{
            "learner.target_update_period": 2,
            "learner.jit_optimizer": False,
            "learner.einsum_dense": False,
        },
    )
    # The shipped defaults: XLA-compiled Adam apply, dense forward products as einsum.
    ours = replace(acme, **{"learner.jit_optimizer": True, "learner.einsum_dense": True})
    server = reverb_server(acme)
    fused, split, compiled = _learners([acme, ours, ours], server)
    batches = [fused.sample() for _ in range(4)]
    # Acme's fused step reads its iterator inside its tf.function (captured when first traced): give it, once,
    # an iterator over exactly these batches.
    fused._learner._iterator = iter(_dataset(batches))
    if algorithm == "dqn":
        # Acme's DQN optimizer makes its Adam slots on its first step: take that step (fused) everywhere first.
        warm = batches.pop(0)
        for learner in (split, compiled):
            learner._learner._iterator = iter(_dataset([warm]))
        for learner in (fused, split, compiled):
            learner._learner._step()
    for other in (split, compiled):
        _copy_state(fused, other)
    compiled_update = make_update_function(compiled._learner, compiled._acme_class, jit_compile=True)
    before = [np.array(v.numpy()) for v in _state(fused)]
    for batch in batches:  # includes a target-network copy (period 2)
        ref = fused._learner._step()  # Acme's own fused tf.function step, on this batch
        got_split = split.update(batch)
        got_compiled = compiled_update(batch)
        for key in ref:
            if "loss" in key:
                np.testing.assert_allclose(got_split[key], ref[key], rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(got_compiled[key], ref[key], rtol=1e-4, atol=1e-5)
    after = [np.array(v.numpy()) for v in _state(fused)]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))  # it did learn something
    for a, b, c in zip(_state(fused), _state(split), _state(compiled), strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.name)
        np.testing.assert_allclose(c.numpy(), a.numpy(), rtol=1e-4, atol=1e-5, err_msg=a.name)


def test_jit_compile_config_runs_the_compiled_step(reverb_server):
    config = tiny_config("d4pg", **{"learner.jit_compile": True})
    server = reverb_server(config)
    (learner,) = _learners([config], server)
    before = learner.steps
    learner.step()
    learner.step()
    assert learner.steps == before + 2 and learner._update is not None
    assert learner._update.experimental_get_tracing_count() == 1  # one compiled function, reused
    assert np.isfinite(list(learner.losses.values())).all()


def test_einsum_dense_matches_matmul_values_and_gradients():
    import sonnet as snt
    import tensorflow as tf

    from actorq.learners.dense import EinsumLinear, use_einsum_dense

    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((16, 24)).astype(np.float32))
    mlp = snt.nets.MLP([32, 8], name="mlp")
    mlp(x)
    names = [v.name for v in mlp.variables]
    twin = snt.nets.MLP([32, 8], name="mlp")
    twin(x)
    for a, b in zip(mlp.variables, twin.variables, strict=True):
        b.assign(a)
    assert use_einsum_dense(twin) == 2
    assert all(type(m) is EinsumLinear for m in twin.submodules if isinstance(m, snt.Linear))
    assert [v.name for v in twin.variables] == names  # checkpoints and published weights are unchanged

    def loss_and_grads(net):
        @tf.function
        def run(inputs):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                loss = tf.reduce_sum(tf.tanh(net(inputs)) ** 2)
            return loss, tape.gradient(loss, [inputs, *net.trainable_variables])

        return run(x)

    ref_loss, ref_grads = loss_and_grads(mlp)
    loss, grads = loss_and_grads(twin)
    np.testing.assert_allclose(loss.numpy(), ref_loss.numpy(), rtol=1e-5)
    for g, r in zip(grads, ref_grads, strict=True):
        assert g is not None
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)
    plain = snt.Linear(8)
    cube = tf.reshape(x, (4, 4, 24))  # other ranks take Sonnet's own path
    expected = plain(cube).numpy()
    use_einsum_dense(plain)
    np.testing.assert_allclose(plain(cube).numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("algorithm", ["d4pg", "dqn"])
def test_the_seed_sets_the_initial_networks(reverb_server, algorithm):
    config = tiny_config(algorithm, seed=3)
    server = reverb_server(config)
    first, again, other = _learners([config, config, replace(config, seed=4)], server)

    def weights(learner) -> list[np.ndarray]:
        return [value for _, value in sorted(learner.get_variables().items())]

    assert all(np.array_equal(a, b) for a, b in zip(weights(first), weights(again), strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(weights(first), weights(other), strict=True))
