"""MLP actors and critic for dense observations."""
import numpy as np
import pytest
import torch

from entmachin.model import MLPActor, MLPCritic, MLPGaussianActor


def test_categorical_actor_contract_and_reevaluation():
    torch.manual_seed(0)
    actor = MLPActor(3, 4, d_hidden=(8,))
    state = torch.randn(5, 3)
    action, log_prob, entropy = actor(state)
    assert action.shape == log_prob.shape == entropy.shape == (5, 1) and action.dtype == torch.int64
    _, again, _ = actor(state, action)
    torch.testing.assert_close(again, log_prob)
    _, flat, _ = actor(state, action[:, 0].float())  # [B] float actions from a buffer
    torch.testing.assert_close(flat, log_prob)
    dist = torch.distributions.Categorical(logits=actor.logits(actor.hidden(state)))
    torch.testing.assert_close(entropy[:, 0], dist.entropy())


def test_categorical_actor_masks_and_determinism():
    torch.manual_seed(0)
    actor = MLPActor(2, 3, d_hidden=(8, 8), activation="relu")
    torch.nn.init.normal_(actor.logits.weight, std=10.0)
    state = np.random.default_rng(0).normal(size=(50, 2)).astype(np.float32)
    mask = torch.zeros(50, 3, dtype=torch.bool)
    mask[:, 1] = True
    action, _, entropy = actor(state, mask=mask)
    assert (action == 1).all() and torch.allclose(entropy, torch.zeros(50, 1))
    best, _, _ = actor(state, deterministic=True)
    logits = actor.logits(actor.hidden(torch.as_tensor(state)))
    assert torch.equal(best[:, 0], logits.argmax(1))


def test_gaussian_actor():
    torch.manual_seed(0)
    actor = MLPGaussianActor(3, 2, log_std_init=-1.0)
    state = torch.randn(4, 3)
    action, log_prob, entropy = actor(state)
    assert action.shape == (4, 2) and log_prob.shape == entropy.shape == (4, 1)
    _, again, _ = actor(state, action)
    torch.testing.assert_close(again, log_prob)
    mean, _, _ = actor(state, deterministic=True)
    dist = torch.distributions.Normal(mean, torch.full_like(mean, np.exp(-1.0)))
    torch.testing.assert_close(actor(state, mean)[1][:, 0], dist.log_prob(mean).sum(1))


def test_critic_and_input_statistics():
    critic = MLPCritic(2, normalize_inputs=True)
    state = torch.tensor([[1.0, 10.0], [3.0, 30.0]])
    assert critic(state).shape == (2, 1)
    assert int(critic.norm.count) == 0
    with critic.collecting_stats():
        critic(state)
    assert int(critic.norm.count) == 2
    critic.freeze()
    with critic.collecting_stats():
        critic(state)
    assert int(critic.norm.count) == 2


def test_errors():
    with pytest.raises(ValueError, match=r"MLPActor: d_state must be a positive int, got 0"):
        MLPActor(0, 2)
    with pytest.raises(ValueError, match=r"MLPActor: n_actions must be a positive int, got 0"):
        MLPActor(2, 0)
    with pytest.raises(ValueError, match=r"MLPCritic: d_hidden must hold positive ints, got \[0\]"):
        MLPCritic(2, d_hidden=[0])
    with pytest.raises(ValueError, match=r"MLPCritic: activation must be one of \['gelu', 'relu', 'tanh'\], got 'elu'"):
        MLPCritic(2, activation="elu")
    with pytest.raises(ValueError, match=r"MLPGaussianActor: d_action must be a positive int, got 0"):
        MLPGaussianActor(2, 0)
    actor = MLPActor(2, 3)
    with pytest.raises(ValueError, match=r"MLPActor.forward: state has shape \(4, 3\); expected \[B, 2\]"):
        actor(torch.zeros(4, 3))
    with pytest.raises(TypeError, match=r"MLPActor.forward: state must be a tensor \[B, 2\], got str"):
        actor("state")
    with pytest.raises(ValueError, match=r"MLPActor.forward: mask has shape \(4, 2\); expected \[B, n_actions\] = \(4, 3\)"):
        actor(torch.zeros(4, 2), mask=torch.ones(4, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"MLPActor.forward: mask row 1 forbids every choice"):
        actor(torch.zeros(2, 2), mask=torch.tensor([[True, False, False], [False, False, False]]))
    with pytest.raises(ValueError, match=r"MLPActor.forward: action 3 is outside \[0, 3\)"):
        actor(torch.zeros(2, 2), torch.tensor([[0], [3]]))
    with pytest.raises(ValueError, match=r"MLPActor.forward: action has shape \(3,\) .* expected 2 integer choices"):
        actor(torch.zeros(2, 2), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"MLPGaussianActor.forward: action has shape \(2, 1\); expected \(2, 2\)"):
        MLPGaussianActor(2, 2)(torch.zeros(2, 2), torch.zeros(2, 1))
