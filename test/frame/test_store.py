"""store_episode / store_rollout: GAE through the frame, bootstrapping rules, errors, no mutation."""
import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from entmachin.buffer import Buffer, Transition, TransitionBase
from entmachin.env import to_vec_actions
from entmachin.frame.a2c import A2C
from entmachin.frame.ppo import PPO
from test.frame._frames import (
    Sparse,
    dense_episode,
    dense_frame,
    dense_step,
    entity_frame,
    entity_states,
    reference_targets,
    stored,
)


@pytest.mark.parametrize("ending", ["terminal", "truncated", "cut"])
@pytest.mark.parametrize("gae_lambda", [0.0, 0.5, 1.0])
def test_store_episode_matches_a_plain_loop(ending, gae_lambda):
    rng = np.random.default_rng(1)
    frame = dense_frame(gae_lambda=gae_lambda, discount=0.9)
    episode = [dense_step(rng) for _ in range(5)]
    episode[-1] = dense_step(rng, terminal=ending == "terminal", truncated=ending == "truncated")
    frame.store_episode(episode)
    ret, adv = reference_targets(frame.critic, episode, 0.9, gae_lambda)
    *_, value, gae_ = stored(frame)
    np.testing.assert_allclose(value.numpy(), ret, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gae_.numpy(), adv, rtol=1e-5, atol=1e-6)


def test_terminal_row_ignores_next_state_and_truncated_row_uses_it():
    rng = np.random.default_rng(2)
    frame = dense_frame(gae_lambda=1.0, discount=1.0)
    with torch.no_grad():
        frame.critic.fc.weight.fill_(1.0)
        frame.critic.fc.bias.zero_()
    term = dense_step(rng, terminal=True, reward=1.0)
    trunc = dense_step(rng, truncated=True, reward=1.0)
    frame.store_episode([term])
    frame.store_episode([trunc])
    *_, value, gae_ = stored(frame)
    with torch.no_grad():
        v_next = float(frame.critic(trunc["next_state"]["state"]))
    assert value[0, 0].item() == pytest.approx(1.0)
    assert value[1, 0].item() == pytest.approx(1.0 + v_next, rel=1e-5)


def test_truncated_in_the_middle_restarts_the_recursion():
    rng = np.random.default_rng(3)
    frame = dense_frame(gae_lambda=0.7, discount=0.95)
    episode = [dense_step(rng) for _ in range(3)] + [dense_step(rng, truncated=True)] + \
        [dense_step(rng) for _ in range(2)] + [dense_step(rng, terminal=True)]
    frame.store_episode(episode)
    ret, adv = reference_targets(frame.critic, episode, 0.95, 0.7)
    *_, value, gae_ = stored(frame)
    np.testing.assert_allclose(gae_.numpy(), adv, rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(0, 2**31 - 1), st.sampled_from([0.0, 0.5, 1.0]))
def test_store_rollout_matches_a_plain_loop(n_steps, n_envs, seed, gae_lambda):
    rng = np.random.default_rng(seed)
    frame = dense_frame(gae_lambda=gae_lambda, discount=0.9)
    steps = [
        dense_step(rng, terminal=rng.random(n_envs) < 0.3, truncated=rng.random(n_envs) < 0.3, n_rows=n_envs)
        for _ in range(n_steps)
    ]
    if n_envs == 1:  # one-row steps still go through the array path
        for s in steps:
            s["reward"] = np.asarray([s["reward"]], np.float32)
    frame.store_rollout(steps)
    ret, adv = reference_targets(frame.critic, steps, 0.9, gae_lambda)
    state, action, reward, terminal, truncated, value, gae_ = stored(frame)
    np.testing.assert_allclose(value.numpy().reshape(n_steps, n_envs), ret, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gae_.numpy().reshape(n_steps, n_envs), adv, rtol=1e-5, atol=1e-5)
    # rows are step-major: row t * B + b is step t of environment b
    np.testing.assert_array_equal(state.state.numpy(), np.concatenate([s["state"]["state"].numpy() for s in steps]))


def test_store_does_not_mutate_the_callers_transitions():
    rng = np.random.default_rng(4)
    frame = dense_frame()
    episode = dense_episode(rng)
    before = copy.deepcopy(episode)
    frame.store_episode(episode)
    assert [sorted(s) for s in episode] == [sorted(s) for s in before]
    for a, b in zip(episode, before):
        assert torch.equal(a["state"]["state"], b["state"]["state"])
        assert a["reward"] == b["reward"]
    frame.replay_buffer.sample_batch(1, sample_method="all")[1][0]["state"].mul_(0)  # buffer copy, not the caller's
    assert torch.equal(episode[0]["state"]["state"], before[0]["state"]["state"])


def test_store_episode_accepts_transitions():
    rng = np.random.default_rng(5)
    frame = dense_frame()
    episode = [Transition(**s) for s in dense_episode(rng, 4)]
    frame.store_episode(episode)
    assert frame.replay_buffer.size() == 4


def test_entity_rollout_with_truncation_uses_one_critic_call():
    envs, states = entity_states(Sparse, n_envs=3, n_steps=4)
    frame = entity_frame(envs)
    calls = []
    frame.critic.register_forward_hook(lambda module, args, out: calls.append(len(out)))
    steps = []
    for t in range(4):
        out = frame.act(states[t])
        done = np.array([t == 3] * 3)
        steps.append({"state": states[t], "action": {"action": to_vec_actions(out.action)},
                      "next_state": states[t + 1], "reward": np.ones(3, np.float32),
                      "terminal": np.zeros(3, bool), "truncated": done})
    frame.store_rollout(steps)
    assert calls == [12 + 3]  # every state and the last step's next states, in one call
    assert frame.replay_buffer.size() == 12


def test_more_rows_than_replay_size_raise():
    rng = np.random.default_rng(6)
    frame = dense_frame(replay_size=5)
    frame.store_episode(dense_episode(rng, 3))
    with pytest.raises(ValueError, match=r"storing 3 rows on top of 3 would exceed replay_size=5.*call update\(\) first"):
        frame.store_episode(dense_episode(rng, 3))
    assert frame.replay_buffer.size() == 3


@pytest.mark.parametrize(
    "mutate, error, match",
    [
        (lambda ep: ep.clear(), ValueError, r"store_episode: got an empty list"),
        (lambda ep: ep[1].pop("reward"), ValueError, r"store_episode\[1\] lacks \['reward'\]"),
        (lambda ep: ep.__setitem__(2, 3), TypeError, r"store_episode\[2\] is a int; expected a dict or a Transition"),
        (lambda ep: ep[0].__setitem__("terminal", 1.0), TypeError, r"store_episode\[0\]\['terminal'\] is a float; expected a bool or a bool tensor/array"),
        (lambda ep: ep[0].__setitem__("reward", "a"), TypeError, r"store_episode\[0\]\['reward'\] is a str"),
        (lambda ep: ep[0].__setitem__("reward", torch.ones(2)), ValueError,
         r"store_episode\[0\]\['reward'\] has shape \(2,\); expected \[1\] or \[1, 1\]"),
        (lambda ep: ep[1]["state"].__setitem__("state", torch.zeros(2, 3)), ValueError,
         r"store_episode\[1\]\['state'\] holds 2 rows; store_episode takes one environment's transitions"),
        (lambda ep: ep[1]["state"].__setitem__("other", torch.zeros(1, 3)), ValueError,
         r"store_episode\[1\]\['state'\] has keys \['other', 'state'\], but PPO.store_episode\[0\]\['state'\] has \['state'\]"),
        (lambda ep: ep[1]["state"].__setitem__("state", np.zeros((1, 3), np.float32)), ValueError,
         r"store_episode\[1\]\['state'\]\['state'\] is a ndarray, but PPO.store_episode\[0\]\['state'\]\['state'\] is a Tensor"),
        (lambda ep: [s["state"].__setitem__("state", [1.0]) for s in ep], TypeError,
         r"store_episode\[0\]\['state'\]\['state'\] is a list; expected a tensor"),
        (lambda ep: ep[-1]["next_state"].__setitem__("state", torch.zeros(2, 3)), ValueError,
         r"store_episode\[3\]\['next_state'\] holds 2 rows"),
        (lambda ep: ep[0].__setitem__("truncated", np.array([1])), TypeError,
         r"store_episode\[0\]\['truncated'\] has dtype int64; expected bool"),
    ],
)
def test_store_episode_errors_name_the_position_and_key(mutate, error, match):
    rng = np.random.default_rng(7)
    frame = dense_frame()
    episode = dense_episode(rng, 4, terminal=False)
    mutate(episode)
    with pytest.raises(error, match=match):
        frame.store_episode(episode)
    assert frame.replay_buffer.size() == 0


@pytest.mark.parametrize("as_transition", [False, True])
@pytest.mark.parametrize("method", ["store_episode", "store_rollout"])
def test_a_misspelt_key_is_refused_not_dropped(method, as_transition):
    rng = np.random.default_rng(9)
    frame = dense_frame()
    episode = dense_episode(rng, 3, terminal=False)
    episode[1]["truncted"] = True
    if as_transition:
        episode = [Transition(**t) for t in episode]
    allowed = r"\['state', 'action', 'next_state', 'reward', 'terminal', 'truncated'" + (
        r", 'stored'\]" if method == "store_rollout" else r"\]")
    with pytest.raises(ValueError, match=rf"PPO.{method}\[1\] has unknown key\(s\) \['truncted'\]; "
                                         rf"a transition takes only {allowed}"):
        getattr(frame, method)(episode)
    assert frame.replay_buffer.size() == 0


def test_store_episode_rejects_a_single_transition():
    frame = dense_frame()
    with pytest.raises(TypeError, match=r"store_episode: expected a list of transitions, got dict"):
        frame.store_episode(dense_step(np.random.default_rng(0)))


def test_store_rollout_rows_must_agree():
    rng = np.random.default_rng(8)
    frame = dense_frame()
    steps = [dense_step(rng, n_rows=3), dense_step(rng, n_rows=2)]
    with pytest.raises(ValueError, match=r"store_rollout\[1\]\['state'\] holds 2 rows, but PPO.store_rollout\[0\]\['state'\] holds 3"):
        frame.store_rollout(steps)
    steps = [dense_step(rng, n_rows=3)]
    steps[0]["action"]["action"] = torch.zeros(2, 1, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"store_rollout\[0\]\['action'\] holds 2 rows, but PPO.store_rollout\[0\]\['state'\] holds 3"):
        frame.store_rollout(steps)


def test_rollout_flags_need_one_value_per_row():
    rng = np.random.default_rng(12)
    frame = dense_frame()
    step = dense_step(rng, n_rows=3)
    step["reward"] = 1.0
    with pytest.raises(ValueError, match=r"store_rollout\[0\]\['reward'\] is a single value, but the transition holds 3 rows"):
        frame.store_rollout([step])
    step["reward"] = np.ones(3, dtype=bool)
    with pytest.raises(TypeError, match=r"store_rollout\[0\]\['reward'\] has dtype bool; expected real numbers"):
        frame.store_rollout([step])


def test_next_state_must_look_like_state():
    rng = np.random.default_rng(9)
    frame = dense_frame()
    step = dense_step(rng)
    step["next_state"] = {"other": torch.zeros(1, 3)}
    with pytest.raises(ValueError, match=r"next_state must have the same keys and value kinds as state"):
        frame.store_episode([step])


def test_critic_returning_the_wrong_count_raises():
    rng = np.random.default_rng(10)
    frame = dense_frame()
    frame.critic.forward = lambda state: torch.zeros(1, 1)
    with pytest.raises(ValueError, match=r"the critic returned 1 values for 4 states"):
        frame.store_episode(dense_episode(rng, 3, terminal=False))


@pytest.mark.parametrize("cls", [A2C, PPO])
def test_both_frames_store_and_update(cls):
    rng = np.random.default_rng(11)
    frame = dense_frame(cls)
    frame.store_episode(dense_episode(rng, 5))
    objective, value_loss = frame.update()
    assert np.isfinite(objective) and np.isfinite(value_loss)
    assert frame.replay_buffer.size() == 0


def test_frames_append_through_the_trusted_path_after_the_first_store(monkeypatch):
    """Rows checked by store_* are not checked and copied again by the buffer."""
    rng = np.random.default_rng(11)
    frame = dense_frame()
    frame.store_episode(dense_episode(rng, 3))
    built = []
    original = TransitionBase.__init__
    monkeypatch.setattr(TransitionBase, "__init__", lambda self, *a: (built.append(1), original(self, *a))[1])
    frame.store_episode(dense_episode(rng, 4))
    assert built == [] and frame.replay_buffer.size() == 7


def test_a_buffer_without_the_trusted_path_gets_transitions():
    class Plain:
        """A user's buffer with only Machin's methods."""

        def __init__(self):
            self.inner = Buffer(100)

        def append(self, transition):
            assert isinstance(transition, TransitionBase)
            self.inner.append(transition)

        def size(self):
            return self.inner.size()

        def clear(self):
            self.inner.clear()

        def sample_batch(self, *args, **kwargs):
            return self.inner.sample_batch(*args, **kwargs)

    rng = np.random.default_rng(12)
    frame = dense_frame(replay_buffer=Plain())
    frame.store_episode(dense_episode(rng, 5))
    frame.update()
    assert frame.n_updates == 1 and frame.replay_buffer.size() == 0


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 5), st.integers(2, 4), st.integers(0, 2**31 - 1))
def test_stored_rows_take_part_in_gae_and_only_they_are_kept(n_steps, n_envs, seed):
    rng = np.random.default_rng(seed)
    steps = [dense_step(rng, terminal=rng.random(n_envs) < 0.3, truncated=rng.random(n_envs) < 0.3, n_rows=n_envs)
             for _ in range(n_steps)]
    every, some = dense_frame(gae_lambda=0.95, discount=0.9), dense_frame(gae_lambda=0.95, discount=0.9)
    some.critic.load_state_dict(every.critic.state_dict())
    mask = rng.random((n_steps, n_envs)) < 0.5
    every.store_rollout(steps)
    some.store_rollout([{**s, "stored": mask[t]} for t, s in enumerate(steps)])
    keep = np.flatnonzero(mask.reshape(-1))
    assert some.replay_buffer.size() == keep.size
    if keep.size:
        for whole, part in zip(stored(every), stored(some)):
            if isinstance(whole, dict):  # state {"state": [N, d]}, action {"action": [N, 1]}
                (key,) = whole.keys()
                whole, part = whole[key], part[key]
            np.testing.assert_array_equal(whole.numpy()[keep], part.numpy())  # the same rows, the same GAE


def test_stored_rows_count_against_replay_size_and_other_frames_refuse_them():
    rng = np.random.default_rng(7)
    frame = dense_frame(replay_size=4)
    steps = [dense_step(rng, terminal=np.zeros(3, bool), truncated=np.zeros(3, bool), n_rows=3) for _ in range(2)]
    frame.store_rollout([{**s, "stored": np.array([True, True, False])} for s in steps])  # 4 of 6 rows
    assert frame.replay_buffer.size() == 4
    with pytest.raises(ValueError, match=r"'stored' chooses rows of a rollout's steps"):
        frame.store_episode([{**dense_episode(rng, 1)[0], "stored": True}])
    with pytest.raises(TypeError, match=r"store_rollout\[0\]\['stored'\]"):
        frame.store_rollout([{**steps[0], "stored": np.array([1, 0, 1])}])
