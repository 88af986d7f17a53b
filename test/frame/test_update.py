"""update(): minibatch walking, step counts, guarded steps, target_kl, annealing, value clipping, logging."""
import copy
import dataclasses
import glob
import math
import os
import re
import warnings

import numpy as np
import pytest
import torch

from entmachin.env import EnvList
from entmachin.frame import NonFiniteUpdateError
from entmachin.frame.a2c import A2C
from entmachin.frame.ppo import PPO
from entmachin.frame.collector import RolloutCollector
from entmachin.frame.rollout import minibatch_schedule
from entmachin.model import MLPActor
from test.frame._frames import D_STATE, LinearCritic, Sparse, dense_episode, dense_frame, entity_frame, small_net


class RecordingWriter:
    def __init__(self):
        self.scalars = []
        self.texts = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def add_text(self, tag, text, step):
        self.texts.append(tag)


def filled(cls=PPO, episodes=3, length=10, **kwargs):
    frame = dense_frame(cls, **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(episodes):
        frame.store_episode(dense_episode(rng, length))
    return frame


def adam_steps(optimizer):
    states = list(optimizer.state.values())
    return int(states[0]["step"]) if states else 0


def test_schedule_walks_shuffled_epochs():
    rng = np.random.default_rng(0)
    schedule = minibatch_schedule(10, 4, 7, rng)
    assert [len(b) for b in schedule] == [4, 3, 3, 4, 3, 3, 4]
    for epoch in (schedule[:3], schedule[3:6]):
        assert sorted(np.concatenate(epoch).tolist()) == list(range(10))
    assert [len(b) for b in minibatch_schedule(5, 100, 2, rng)] == [5, 5]


def test_update_returns_machins_pair_and_clears():
    frame = filled()
    objective, value_loss = frame.update()
    stats = frame.last_update
    assert objective == -stats.policy_loss and value_loss == stats.value_loss
    assert frame.replay_buffer.size() == 0 and frame.n_updates == 1
    assert stats.minibatches == 10 and not stats.stopped_early


def test_empty_buffer_and_concatenate_errors():
    frame = dense_frame()
    with pytest.raises(RuntimeError, match=r"PPO.update: the replay buffer is empty; store transitions"):
        frame.update()
    with pytest.raises(ValueError, match=r"PPO.update: concatenate_samples must be True, got False"):
        frame.update(concatenate_samples=False)


def test_step_counts_follow_update_times():
    frame = filled(actor_update_times=3, critic_update_times=5, batch_size=8)
    frame.update()
    assert adam_steps(frame.actor_optim) == 3 and adam_steps(frame.critic_optim) == 5
    frame = filled(actor_update_times=0, critic_update_times=2)
    objective, _ = frame.update()
    assert math.isnan(objective) and adam_steps(frame.actor_optim) == 0


def test_update_policy_false_leaves_the_actor():
    frame = filled()
    before = [p.detach().clone() for p in frame.actor.parameters()]
    frame.update(update_policy=False)
    assert all(torch.equal(a, b) for a, b in zip(before, frame.actor.parameters()))
    assert adam_steps(frame.critic_optim) == 10


def test_shared_network_steps_once_per_minibatch():
    envs = EnvList(Sparse, 4, seed=0)
    frame = entity_frame(envs, actor_update_times=3, critic_update_times=4, batch_size=6, entropy_weight=-0.01)
    RolloutCollector(frame, envs, n_steps=5).collect()
    objective, value_loss = frame.update()
    assert math.isfinite(objective) and math.isfinite(value_loss)
    assert adam_steps(frame.actor_optim) == 4


def _entity_update(joint):
    envs = EnvList(Sparse, 4, seed=0)
    frame = entity_frame(envs, actor_update_times=3, critic_update_times=4, batch_size=6, entropy_weight=-0.01)
    RolloutCollector(frame, envs, n_steps=5).collect()
    frame._joint = joint
    calls = []
    frame.actor.trunk.register_forward_hook(lambda *args: calls.append(1))
    frame.update()
    return frame, len(calls)


def test_shared_network_runs_its_trunk_once_per_minibatch():
    joint, joint_calls = _entity_update(True)
    separate, separate_calls = _entity_update(False)
    assert separate._joint is False and joint.critic.shared_actor is joint.actor
    # 1 pass for the old log-probs, then 3 minibatches train both (1 pass each, or 2) and 1 only the value.
    assert joint_calls == 1 + 3 + 1 and separate_calls == 1 + 3 * 2 + 1
    for a, b in zip(joint.actor.parameters(), separate.actor.parameters()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _separate_entity_update(skip, monkeypatch):
    """A float64 update of a RogueNet actor with a critic of its own, over Sparse's rows (about half of them
    without actors); the rows and actors of each ``eval_act`` call. ``skip=False``: the actor sees every row,
    as it did before it skipped the rows without actors."""
    envs = EnvList(Sparse, 4, seed=0)
    actor, critic = small_net(envs).double(), small_net(envs).critic().double()
    frame = PPO(actor, critic, torch.optim.Adam, torch.nn.MSELoss(), seed=0, actor_update_times=3,
                critic_update_times=4, batch_size=6, entropy_weight=-0.01)
    assert frame._joint is False
    RolloutCollector(frame, envs, n_steps=6).collect()
    if not skip:
        monkeypatch.setattr("entmachin.frame.a2c.acting_rows", lambda action, n_rows: None)
    calls, eval_act = [], frame.eval_act

    def counted(state, action):
        moves = action["action"]["move"]
        calls.append((len(moves), int(moves.lengths.gt(0).sum())))
        return eval_act(state, action)

    frame.eval_act = counted
    frame.update()
    return frame, calls


def test_the_actor_skips_rows_without_actors_with_the_same_update(monkeypatch):
    skipped, skipped_calls = _separate_entity_update(True, monkeypatch)
    full, full_calls = _separate_entity_update(False, monkeypatch)
    assert all(rows == acting for rows, acting in skipped_calls)  # old log-probs and minibatches: acting rows only
    assert sum(rows for rows, _ in full_calls) > sum(rows for rows, _ in skipped_calls)
    assert [acting for _, acting in full_calls] == [acting for _, acting in skipped_calls]
    for a, b in zip([*skipped.actor.parameters(), *skipped.critic.parameters()],
                    [*full.actor.parameters(), *full.critic.parameters()]):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"):
        assert getattr(skipped.last_update, key) == pytest.approx(getattr(full.last_update, key), rel=1e-10, abs=1e-12)


def test_separate_critic_is_not_evaluated_jointly():
    assert filled()._joint is False


def test_non_finite_value_loss_skips_the_critic_step():
    frame = filled(actor_update_times=2, critic_update_times=2)
    frame.critic.register_forward_hook(lambda m, args, out: out * float("nan") if m.training else out)
    before = [p.detach().clone() for p in frame.critic.parameters()]
    with pytest.warns(RuntimeWarning, match=r"PPO.update: non-finite value loss; skipped this critic step"):
        frame.update()
    assert all(torch.equal(a, b) for a, b in zip(before, frame.critic.parameters()))
    assert adam_steps(frame.critic_optim) == 0 and adam_steps(frame.actor_optim) == 2
    assert frame.last_update.skipped_steps == 2 and math.isnan(frame.last_update.value_loss)


def test_non_finite_gradients_skip_the_actor_step():
    frame = filled(actor_update_times=1, critic_update_times=1)
    first = next(frame.actor.parameters())
    first.register_hook(lambda grad: grad * float("inf"))
    before = [p.detach().clone() for p in frame.actor.parameters()]
    with pytest.warns(RuntimeWarning, match=r"non-finite gradients of policy loss; skipped this actor step"):
        frame.update()
    assert all(torch.equal(a, b) for a, b in zip(before, frame.actor.parameters()))
    assert adam_steps(frame.actor_optim) == 0 and first.grad is None


def test_non_finite_entropy_is_named():
    frame = filled(actor_update_times=1, critic_update_times=1, entropy_weight=-0.01)
    frame.actor.register_forward_hook(lambda m, args, out: (*out[:2], out[2] * math.inf) if m.training else out)
    with pytest.warns(RuntimeWarning, match=r"PPO.update: non-finite entropy; skipped this actor step"):
        frame.update()
    assert frame.last_update.non_finite == ("entropy",)
    assert frame.last_update.optimizer_steps == {"actor": (1, 1), "critic": (1, 0)}


def _nan_(tensors):
    with torch.no_grad():
        for t in tensors:
            t.fill_(math.nan)


def _updates_until_the_error(frame, n_updates):
    """``n_updates - 1`` updates that only warn, then the one that raises; returns its error."""
    rng = np.random.default_rng(1)
    for i in range(n_updates):
        if frame.replay_buffer.size() == 0:
            frame.store_episode(dense_episode(rng, 10))
        with pytest.warns(RuntimeWarning, match="non-finite"):
            if i < n_updates - 1:
                frame.update()
                continue
            with pytest.raises(NonFiniteUpdateError) as error:
                frame.update()
    return str(error.value)


def test_third_update_with_nan_actor_parameters_raises_naming_them():
    frame = filled(actor_update_times=2, critic_update_times=2)
    _nan_(frame.actor.parameters())
    message = _updates_until_the_error(frame, 3)
    assert re.match(r"PPO.update: 3 updates in a row skipped every actor step for non-finite values; in the last "
                    r"one: policy loss. Now the parameters already are non-finite \(actor\.hidden\.0\.weight, "
                    r"actor\.", message)
    assert "; there are no input statistics. The frame is as that update left it" in message
    # the update itself completed: rows consumed, counted, the critic trained
    assert frame.n_updates == 3 and frame.replay_buffer.size() == 0 and adam_steps(frame.critic_optim) == 6
    with pytest.raises(NonFiniteUpdateError):  # still broken: the fourth raises too
        frame.store_episode(dense_episode(np.random.default_rng(2), 10))
        with pytest.warns(RuntimeWarning):
            frame.update()


def test_nan_input_statistics_are_named():
    torch.manual_seed(0)
    frame = PPO(MLPActor(D_STATE, 2, normalize_inputs=True), LinearCritic(), torch.optim.Adam, torch.nn.MSELoss(),
                actor_update_times=2, critic_update_times=2, seed=0)
    frame.actor.norm.count.fill_(10)
    _nan_([frame.actor.norm.mean])
    message = _updates_until_the_error(frame, 3)
    assert "every actor step" in message and "in the last one: policy loss" in message
    assert "Now the parameters are finite; input statistics already are non-finite (actor.norm.mean)" in message


def test_overflowing_rewards_name_the_loss_term_with_finite_parameters():
    frame = dense_frame(actor_update_times=2, critic_update_times=2)
    rng = np.random.default_rng(0)
    for i in range(3):
        episode = dense_episode(rng, 10)
        for step in episode:
            step["reward"] *= 1e20  # squared error beyond float32
        frame.store_episode(episode)
        with pytest.warns(RuntimeWarning, match=r"non-finite value loss; skipped this critic step"):
            if i < 2:
                frame.update()
                continue
            with pytest.raises(NonFiniteUpdateError, match=r"skipped every critic step for non-finite values; in "
                               r"the last one: value loss. Now the parameters are finite; there are no input"):
                frame.update()


def test_one_good_update_resets_the_count():
    frame = filled(episodes=1, actor_update_times=1, critic_update_times=1)
    good = [p.detach().clone() for p in frame.actor.parameters()]
    rng = np.random.default_rng(1)
    for broken in (True, True, False, True, True):
        if broken:
            _nan_(frame.actor.parameters())
        else:
            with torch.no_grad():
                for p, g in zip(frame.actor.parameters(), good):
                    p.copy_(g)
            frame.actor_optim.state.clear()  # Adam's moments went nan with the parameters
        if frame.replay_buffer.size() == 0:
            frame.store_episode(dense_episode(rng, 10))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            frame.update()
    assert frame.n_updates == 5
    frame.store_episode(dense_episode(rng, 10))
    with pytest.raises(NonFiniteUpdateError), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        frame.update()


def test_target_kl_stops_early():
    frame = filled(actor_update_times=20, critic_update_times=20, batch_size=5, actor_learning_rate=0.5,
                   target_kl=1e-6)
    frame.update()
    stats = frame.last_update
    assert stats.stopped_early and 1 <= stats.minibatches < 20


def test_learning_rate_anneals_linearly():
    frame = filled(episodes=1, n_anneal_updates=4, actor_learning_rate=0.4, critic_learning_rate=0.8)
    rng = np.random.default_rng(1)
    seen = []
    for _ in range(5):
        frame.store_episode(dense_episode(rng, 4))
        frame.update()
        seen.append([o.param_groups[0]["lr"] for o in frame.optimizers])
    assert sum(seen[:4], []) == pytest.approx([0.4, 0.8, 0.3, 0.6, 0.2, 0.4, 0.1, 0.2])
    assert seen[4] == [0.0, 0.0]


@pytest.mark.parametrize("cls", [A2C, PPO])
def test_anneal_entropy_scales_the_entropy_weight_with_the_learning_rates(cls):
    """The second of four annealed updates steps exactly as a frame whose entropy weight is 3/4 of it."""
    rng = np.random.default_rng(1)
    annealed = filled(cls, episodes=1, n_anneal_updates=4, entropy_weight=-0.5, anneal_entropy=True)
    annealed.update()
    annealed.store_episode(dense_episode(rng, 10))
    fixed, full = copy.deepcopy(annealed), copy.deepcopy(annealed)
    fixed.config = dataclasses.replace(fixed.config, entropy_weight=-0.5 * 0.75, anneal_entropy=False)
    full.config = dataclasses.replace(full.config, anneal_entropy=False)
    for frame in (annealed, fixed, full):
        frame.update()
    pairs = list(zip(annealed.actor.parameters(), fixed.actor.parameters(), full.actor.parameters()))
    for a, b, _ in pairs:
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert any(not torch.equal(a, c) for a, _, c in pairs)  # the weight does change the step


@pytest.mark.parametrize(("kwargs", "missing"), [({"entropy_weight": -0.1}, "n_anneal_updates=None"),
                                                 ({"n_anneal_updates": 4}, "entropy_weight=None")])
def test_anneal_entropy_needs_a_weight_and_a_schedule(kwargs, missing):
    with pytest.raises(ValueError, match=rf"PPO: anneal_entropy anneals entropy_weight over n_anneal_updates; .*{missing}"):
        dense_frame(PPO, anneal_entropy=True, **kwargs)


def test_value_clip_keeps_predictions_near_the_stored_values():
    frame = filled(episodes=1, length=8, actor_update_times=0, critic_update_times=1, batch_size=8,
                   value_clip=1e-7, value_weight=1.0)
    _, (advantage,) = frame.replay_buffer.sample_batch(8, sample_method="all", sample_attrs=["gae"])
    _, value_loss = frame.update()
    # clipped predictions equal the stored values, so the loss is the mean squared advantage
    assert value_loss == pytest.approx(float((advantage**2).mean()), rel=1e-4)


def test_gradient_max_clips_the_total_norm():
    norms = []

    class Recording(torch.optim.SGD):
        def step(self, closure=None):
            grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
            norms.append(float(torch.nn.utils.get_total_norm(grads)))
            return super().step(closure)

    torch.manual_seed(0)
    frame = PPO(MLPActor(D_STATE, 2), LinearCritic(), Recording, torch.nn.MSELoss(), gradient_max=1e-3,
                actor_learning_rate=0.1, critic_learning_rate=0.1)
    frame.store_episode(dense_episode(np.random.default_rng(0), 10))
    frame.update()
    assert norms and max(norms) <= 1e-3 * 1.0001


@pytest.mark.parametrize("cls", [A2C, PPO])
def test_every_update_logs_to_the_writer(cls):
    writer = RecordingWriter()
    frame = filled(cls, writer=writer, entropy_weight=-0.01)
    frame.update()
    tags = {tag for tag, _, step in writer.scalars if step == 1}
    expected = {"losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl",
                "charts/learning_rate", "charts/skipped_steps", "charts/minibatches"}
    assert expected <= tags
    assert ("losses/clipfrac" in tags) == (cls is PPO)
    frame.store_episode(dense_episode(np.random.default_rng(1), 8))
    frame.update(log_step=4096)  # the caller's step, e.g. environment steps
    assert {tag for tag, _, step in writer.scalars if step == 4096} == tags


def test_writer_from_a_log_dir(tmp_path):
    frame = filled(writer=str(tmp_path / "run"))
    frame.update()
    frame.close()
    assert glob.glob(str(tmp_path / "run" / "events.out.tfevents.*"))


def test_visualize_writes_the_loss_graphs(tmp_path):
    writer = RecordingWriter()
    frame = filled(visualize=True, visualize_dir=str(tmp_path), writer=writer)
    frame.update()
    for name in ("actor", "critic"):
        text = open(os.path.join(tmp_path, f"{name}.dot")).read()
        assert text.startswith(f'digraph "{name}"') and "->" in text
    assert writer.texts == ["graph/actor", "graph/critic"]


def test_a2c_and_ppo_objectives_differ_only_by_ratio():
    frame_a = filled(A2C, actor_update_times=1, critic_update_times=1, batch_size=30)
    frame_p = filled(PPO, actor_update_times=1, critic_update_times=1, batch_size=30)
    objective_a, loss_a = frame_a.update()
    objective_p, loss_p = frame_p.update()
    # first minibatch: ratio 1, so PPO's objective is mean(A) = 0 after normalisation
    assert objective_p == pytest.approx(0.0, abs=1e-6) and loss_a == pytest.approx(loss_p)
    assert objective_a != pytest.approx(0.0, abs=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["dense", "entity"])
def test_models_on_cuda_with_the_buffer_on_the_cpu(kind):
    if kind == "dense":
        frame = dense_frame(writer=RecordingWriter(), value_clip=0.5)
        frame.actor.cuda()
        frame.critic.cuda()
        rng = np.random.default_rng(0)
        for _ in range(3):
            frame.store_episode(dense_episode(rng, 10))
    else:
        envs = EnvList(Sparse, 4, seed=0)
        frame = entity_frame(envs, writer=RecordingWriter(), entropy_weight=-0.01, target_kl=10.0)
        frame.actor.cuda()
        RolloutCollector(frame, envs, n_steps=5).collect()
    assert frame.replay_buffer.buffer_device.type == "cpu"
    objective, value_loss = frame.update()
    assert math.isfinite(objective) and math.isfinite(value_loss)
    assert next(frame.actor.parameters()).device.type == "cuda"
