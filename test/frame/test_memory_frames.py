"""PPO and A2C with a network that has memory: states carried while collecting, whole sequences while training."""
import numpy as np
import pytest
import torch
from torch import nn

from entmachin.env import EnvList
from entmachin.env.examples import Recall
from entmachin.frame import A2C, PPO, evaluate
from entmachin.frame.collector import RolloutCollector
from entmachin.frame.memory import MemoryRows, sequence_groups, time_major
from entmachin.frame.safe_call import safe_call
from entmachin.model.config import MemoryConfig, RogueNetConfig
from entmachin.model.rogue_net import RogueNet


def _frame(cls=PPO, env=Recall, **kwargs):
    torch.manual_seed(0)
    e = env()
    net = RogueNet(e.obs_space(), e.action_space(), RogueNetConfig(d_model=16, n_layer=1,
                                                                   memory=MemoryConfig(size=8)))
    options = dict(batch_size=20, actor_learning_rate=3e-3, critic_learning_rate=3e-3, actor_update_times=2,
                   critic_update_times=2, seed=0)
    return cls(net, net.critic(), torch.optim.Adam, nn.MSELoss(), **{**options, **kwargs})


def test_sequences_are_one_rows_steps_in_time_order_and_minibatches_are_time_major():
    [(rows, _)] = sequence_groups([(4, 2)], 2, "update")  # rows t * 2 + b of 4 steps of 2 environments
    assert rows.tolist() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert time_major(rows[[0, 3]]).tolist() == [0, 5, 2, 7]
    [group] = sequence_groups([(4, 2), (4, 1)], None, "update")
    assert group.rows.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 9, 10, 11]]
    [(rows, prior)] = sequence_groups([(6, 2)], 2, "update", burn_in=2)  # the two steps before each sequence
    assert rows.tolist() == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11]]
    assert prior.tolist() == [[-1, -1], [-1, -1], [0, 2], [1, 3], [4, 6], [5, 7]]
    with pytest.raises(ValueError, match="frame.sequence_length=3 does not divide the rollout's 4 steps"):
        sequence_groups([(4, 2)], 3, "PPO.update")
    with pytest.raises(ValueError, match=r"the stored rollouts have \[3, 4\] steps"):
        sequence_groups([(4, 2), (3, 2)], None, "PPO.update")


def test_the_collector_stores_each_rows_state_and_resets_it_where_an_episode_begins():
    ppo = _frame(sequence_length=5)
    envs = EnvList(Recall, 3, seed=0)
    collector = RolloutCollector(ppo, envs, 10)
    stored = []
    ppo.store_rollout = stored.append  # what the frame is given
    collector.collect()
    steps = stored[0]
    assert [s["state"]["episode_start"][:, 0].tolist() for s in steps[:6]] == \
        [[True] * 3, [False] * 3, [False] * 3, [False] * 3, [False] * 3, [True] * 3]  # 5-step episodes
    assert float(steps[5]["state"]["memory"].abs().sum()) == 0.0  # the next episode starts from zeros
    assert float(steps[3]["state"]["memory"].abs().sum()) > 0.0
    for t in range(9):  # the state a row acts with is the one its previous step returned
        if not steps[t + 1]["state"]["episode_start"].any():
            torch.testing.assert_close(steps[t]["next_state"]["memory"], steps[t + 1]["state"]["memory"])
    snapshot = collector.snapshot()
    again = RolloutCollector(ppo, EnvList(Recall, 3, seed=0), 10)
    again.restore(snapshot)
    torch.testing.assert_close(again._memory.memory, collector._memory.memory)
    with pytest.raises(ValueError, match="holds no recurrent state"):
        again.restore({k: v for k, v in snapshot.items() if k != "memory"})
    envs.close()


@pytest.mark.parametrize("cls", [PPO, A2C])
def test_an_update_trains_on_whole_sequences_and_refuses_a_length_that_does_not_divide(cls):
    frame = _frame(cls, sequence_length=5)
    envs = EnvList(Recall, 8, seed=0)
    collector = RolloutCollector(frame, envs, 10)
    assert sum(collector.collect().episode_returns) > 0  # something to learn from
    before = [p.detach().clone() for p in frame.actor.memory.parameters()]
    frame.update()
    assert any(not torch.equal(a, b) for a, b in zip(before, frame.actor.memory.parameters()))
    assert frame.replay_buffer.size() == 0 and frame._chunks == []
    bad = _frame(cls, sequence_length=3)
    RolloutCollector(bad, envs, 10).collect()
    with pytest.raises(ValueError, match="sequence_length=3 does not divide the rollout's 10 steps"):
        bad.update()
    assert bad.replay_buffer.size() == 80  # the update changed nothing
    envs.close()


def test_the_first_minibatch_of_an_update_sees_the_policy_it_acted_with():
    """Old log-probabilities are recomputed over whole sequences from the stored states: at the first
    minibatch the policy has not moved, so the ratio is 1 and the approximate KL 0."""
    ppo = _frame(sequence_length=5, actor_update_times=1, critic_update_times=1)
    ppo.writer = None
    envs = EnvList(Recall, 4, seed=0)
    RolloutCollector(ppo, envs, 10).collect()
    seen = []
    original = ppo._minibatch

    def spy(batch, old, *args):
        losses = original(batch, old, *args)
        seen.append(float(losses.approx_kl))
        return losses

    ppo.config = ppo.config.__class__(**{**ppo.config.__dict__, "target_kl": 10.0})
    ppo._minibatch = spy
    ppo.update()
    assert seen and abs(seen[0]) < 1e-6
    envs.close()


def test_memory_needs_the_actors_own_critic_and_every_row():
    e = Recall()
    net = RogueNet(e.obs_space(), e.action_space(), RogueNetConfig(memory=MemoryConfig(size=4)))
    other = RogueNet(e.obs_space(), e.action_space(), RogueNetConfig())
    with pytest.raises(ValueError, match="the critic must be its own value path"):
        PPO(net, other.critic(), torch.optim.Adam, nn.MSELoss())
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss())
    envs = EnvList(Recall, 2, seed=0)
    with pytest.raises(ValueError, match="symmetries not with memory yet"):
        RolloutCollector(ppo, envs, 5, symmetries=[object()])
    envs.close()


def test_evaluation_carries_the_state_across_steps_and_resets_it_between_episodes():
    """A policy that reads its memory: evaluation must give it the states it produced (a network given
    zeros every step could not be told apart from a feed-forward one)."""
    ppo = _frame()
    rows = MemoryRows(ppo.actor.memory_size, 2)
    calls = []
    act = ppo.act

    def spy(state, *args, **kwargs):
        calls.append((state["memory"].clone(), state["episode_start"].clone()))
        return act(state, *args, **kwargs)

    ppo.act = spy
    torch.nn.init.normal_(ppo.actor.memory.out.weight)
    result = evaluate(ppo, Recall, 4, seed=0, num_envs=2)
    assert len(result.returns) == 4 and rows.memory.shape == (2, 8)
    assert calls[0][1].all() and not calls[1][1].any() and calls[5][1].all()
    assert float(calls[1][0].abs().sum()) > 0 and float(calls[5][0].abs().sum()) == 0


@pytest.mark.slow
def test_ppo_with_memory_learns_recall_and_a_feed_forward_policy_stays_at_its_bound(tmp_path):
    """The bundled config (seed 0) against the same without memory, whose choice cannot see the cue."""
    from entmachin.run import train

    frame = train("Recall", progress=False, run_dir=str(tmp_path / "memory"))
    assert evaluate(frame, Recall, 200, seed=7).mean >= 0.95
    frame = train("Recall", overrides=["train.total_steps=10240", "model.memory=null", "frame.sequence_length=null"],
                  progress=False, run_dir=str(tmp_path / "feed-forward"))
    assert evaluate(frame, Recall, 400, seed=7).mean < 0.35  # 1/4 in expectation


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_ppo_with_memory_on_the_card_learns_recall(tmp_path):
    """The bundled config with train.device=cuda (one seed on the card): the states cross between the
    collector (CPU) and the network (the card) each step, and the sequences train there."""
    from entmachin.run import train

    frame = train("Recall", overrides=["train.device=cuda"], progress=False, run_dir=str(tmp_path / "run"))
    assert next(frame.actor.parameters()).device.type == "cuda"
    assert evaluate(frame, Recall, 200, seed=7).mean >= 0.95




def test_burn_in_replays_the_steps_before_each_sequence_from_the_state_stored_with_the_first():
    """``frame.burn_in``: a minibatch's sequences with ``k`` earlier steps in their rollout start from the state
    the current network reaches over those steps (stepped one by one here, from the state stored with the first
    of them, resetting where an episode begins); the others keep the state stored with them."""
    from entmachin.frame.memory import MemoryRows, sequence_schedule
    from entmachin.frame.rollout import Rollout

    ppo = _frame(sequence_length=5, burn_in=4, batch_size=40)
    envs = EnvList(lambda: Recall(delay=2), 4, seed=0)  # 3-step episodes: the states run across sequences
    RolloutCollector(ppo, envs, 10).collect()
    envs.close()
    torch.nn.init.normal_(ppo.actor.memory.out.weight)  # other parameters than the acting ones
    rollout = Rollout.read(ppo.replay_buffer)
    schedule, plan = sequence_schedule(ppo._chunks, ppo.config, 1, np.random.default_rng(0), "test")
    rows = schedule[0]  # all 8 sequences, time-major: rows[:8] are their first steps
    batch = plan.burn.apply(ppo, rollout, 0, rollout.minibatch(torch.from_numpy(rows)))
    replayed = 0
    for s, first in enumerate(rows[:8].tolist()):
        t0, b = divmod(first, 4)
        if t0 < 4:  # the first window of its row: no earlier steps, the stored state
            torch.testing.assert_close(batch.state["memory"][s], rollout.state["memory"][first])
            continue
        carried = MemoryRows(ppo.actor.memory_size, 1)
        carried.memory = rollout.state["memory"][(t0 - 4) * 4 + b][None].clone()
        for t in range(t0 - 4, t0):
            row = torch.tensor([t * 4 + b])
            step = {**rollout.state[row], "memory": carried.memory}
            with torch.no_grad():
                out = safe_call(ppo.actor, step, {"action": rollout.action[row]})
            carried.memory = out.memory
            nxt = (t + 1) * 4 + b
            if bool(rollout.state["episode_start"][nxt]):  # the next step begins an episode: zeros
                carried.memory = torch.zeros_like(carried.memory)
        if not bool(rollout.state["episode_start"][first]):
            torch.testing.assert_close(batch.state["memory"][s], carried.memory[0], atol=1e-5, rtol=0)
            replayed += 1
    assert replayed >= 2
