"""Behaviour cloning with memory: sequences of recorded episodes, each started from a recomputed state."""
import numpy as np
import pytest
import torch

pytest.importorskip("pyarrow")

from entmachin.data import Dataset  # noqa: E402
from entmachin.env import CategoricalAction  # noqa: E402
from entmachin.env.examples import Recall  # noqa: E402
from entmachin.frame import BC, evaluate  # noqa: E402
from entmachin.frame.bc_sequences import check_episodes, sequence_batch, windows  # noqa: E402
from entmachin.model.config import MemoryConfig, RogueNetConfig  # noqa: E402
from entmachin.model.rogue_net import RogueNet  # noqa: E402
from entmachin.run.cloning import discounted_returns, episode_order  # noqa: E402
from entmachin.run.record import record  # noqa: E402

_cue = {}


def demonstrate(observation, action_space, rng):
    """Recall's optimal demonstrator: it keeps the cue of an episode's first observation and chooses it. It
    remembers one cue, so it records one environment at a time (``num_envs=1``)."""
    cue = observation.features["Cue"]
    if len(cue):
        _cue["colour"] = int(np.argmax(cue[0]))
    mask = observation.actions["choose"]
    if not mask.actor_ids:
        return {}
    return {"choose": CategoricalAction(actors=list(mask.actor_ids), indices=np.array([_cue["colour"]]),
                                        index_to_label=action_space["choose"].index_to_label)}


def recall_rows(directory, policy, episodes, seed=0):
    """The acting rows of ``episodes`` recorded episodes of Recall in episode order, their returns and
    episode ids."""
    out = record("Recall", policy, episodes, str(directory), seed=seed, num_envs=1, progress=False)
    rows = Dataset(out.directory).read()
    order, ids = episode_order(rows, np.flatnonzero(~rows.final), "test")
    return rows.take(order), discounted_returns(rows, 0.99)[order], ids


@pytest.fixture(scope="module")
def demonstrations(tmp_path_factory):
    return recall_rows(tmp_path_factory.mktemp("data") / "demo", "test.frame.test_bc_memory:demonstrate", 300)


def _bc(memory=True, **settings):
    torch.manual_seed(0)
    e = Recall()
    net = RogueNet(e.obs_space(), e.action_space(),
                   RogueNetConfig(d_model=16, n_layer=1, memory=MemoryConfig(size=16) if memory else None))
    options = dict(batch_size=160, actor_update_times=4, critic_update_times=4, actor_learning_rate=1e-2,
                   critic_learning_rate=1e-2, seed=0)
    return BC(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss(), **{**options, **settings})


def test_episodes_are_cut_into_sequences_padded_at_the_end_and_replayed_from_their_start():
    episodes = np.array([7, 7, 7, 7, 7, 3, 3, 3])  # 5 steps, then 3
    w = windows(episodes, 2)
    assert w.first.tolist() == [0, 2, 4, 5, 7] and w.offset.tolist() == [0, 2, 4, 0, 2]
    assert w.size.tolist() == [2, 2, 1, 2, 1] and w.length == 2
    whole = windows(episodes, None)
    assert whole.first.tolist() == [0, 5] and whole.size.tolist() == [5, 3] and whole.length == 5
    batch = sequence_batch(w, np.array([3, 2, 4]))  # steps 0-1 of the second; step 4 of the first; step 2 of the second
    assert batch.rows.tolist() == [5, 4, 7, 6, 4, 7]  # time-major: t * S + s, padding repeats the last row
    assert batch.valid.tolist() == [True, True, True, True, False, False]
    assert batch.episode_start.tolist() == [True, False, False, False, False, False]
    assert batch.n_prior == 4  # the first sequence's four earlier steps; the others padded at the front
    assert batch.prior.reshape(4, 3).T.tolist() == [[5, 5, 5, 5], [0, 1, 2, 3], [5, 5, 5, 6]]
    assert batch.prior_start.reshape(4, 3).T.tolist() == [[True] * 4, [True, False, False, False],
                                                          [True, True, True, False]]
    assert sequence_batch(w, np.array([0, 3])).prior is None  # both begin their episodes: zeros, nothing replayed


def test_episodes_must_keep_their_rows_together():
    assert check_episodes([4, 4, 1], 3, "here").tolist() == [4, 4, 1]
    with pytest.raises(ValueError, match="rows of episode 4 are not together"):
        check_episodes([4, 1, 4], 3, "here")
    with pytest.raises(ValueError, match=r"int \[2\]"):
        check_episodes([4, 1, 4], 2, "here")
    bc = _bc()
    with pytest.raises(ValueError, match="episodes=ids"):
        bc.store_rows({}, {}, np.zeros(3))


def _replay(net, held):
    """Each episode of ``held`` stepped one row at a time from its start, carrying the state: every actor's
    negative log-likelihood of its recorded choice, and every row's value."""
    nll, values = [], np.zeros(held.n_rows, np.float32)
    state = torch.zeros(1, net.memory_size)
    with torch.no_grad():
        for r in range(held.n_rows):
            one = held.take(np.array([r]))
            start = r == 0 or held.episodes[r] != held.episodes[r - 1]
            keywords = dict(memory=state, episode_start=torch.tensor([[start]]), sequence_length=1)
            tables, value = net.log_probabilities(one.state["entities"], one.state["action_masks"], value=True,
                                                  **keywords)
            log_p = tables["choose"].data
            if log_p.shape[0]:
                nll.append(-log_p[0, int(one.action["choose"].as_array()[0, 0])])
            values[r] = float(value[0, 0])
            state = net(one.state["entities"], one.state["action_masks"], None, one.action, **keywords).memory
    return torch.stack(nll), torch.from_numpy(values)


def minibatch_as_replayed(bc, length, replay):
    """One minibatch of every stored sequence (shuffled) of ``bc``, checked against ``replay(net, held)``, a
    step-by-step replay of the episodes: its policy loss is the replay's mean negative log-likelihood and its
    values are the replay's. Returns ``(policy, value, predicted, nll, rows_of)``, ``rows_of`` the held row of
    each real step of the minibatch."""
    held = bc._held
    w = windows(held.episodes, length)
    picks = np.random.default_rng(0).permutation(len(w.first))  # every sequence, shuffled
    batch, recurrent, valid = bc._minibatch_of(held, w, picks)
    policy, value, predicted, _ = bc._losses(batch, True, True, recurrent, valid)
    nll, values = replay(bc.actor, held)
    torch.testing.assert_close(policy.detach(), nll.mean(), atol=1e-5, rtol=1e-5)
    rows_of = sequence_batch(w, picks).rows[valid.numpy()]
    torch.testing.assert_close(predicted.detach().reshape(-1), values[rows_of], atol=1e-5, rtol=1e-5)
    return policy, value, predicted, nll, rows_of


@pytest.mark.parametrize("length", [2, 3, None])
def test_the_loss_of_sequences_is_the_loss_of_a_step_by_step_replay_of_the_episodes(tmp_path, length):
    """Random episodes, some cut short (episodes of 2 to 5 steps), a network whose memory changes its
    choices: every sequence of one minibatch, its state recomputed, scores each actor as the replay does."""
    rows, returns, ids = recall_rows(tmp_path / "random", "random", 6, seed=1)
    keep = np.ones(len(ids), bool)
    for e, cut in ((1, 3), (4, 1)):  # drop the last steps of two episodes
        keep[np.flatnonzero(ids == e)[-cut:]] = False
    rows, returns, ids = rows.take(np.flatnonzero(keep)), returns[keep], ids[keep]
    bc = _bc(sequence_length=length, distill_weight=0.0)
    net = bc.actor
    torch.nn.init.normal_(net.memory.out.weight)  # the state moves the choices
    bc.store_rows(rows.state(), rows.action, returns, episodes=ids)
    held = bc._held
    policy, value, predicted, nll, rows_of = minibatch_as_replayed(bc, length, _replay)
    assert sorted(rows_of.tolist()) == list(range(held.n_rows))  # the held row of each real step, each once
    expected = torch.nn.functional.mse_loss(predicted.detach().reshape(-1), torch.from_numpy(returns[rows_of]))
    torch.testing.assert_close(value.detach(), expected * bc.config.value_weight)
    policy.backward()
    assert net.memory.cell.weight_hh.grad.abs().sum() > 0  # the gradient reaches the recurrent core
    loss, _ = bc.accuracy(held, rows_per_pass=7)  # whole episodes, a few per pass
    assert loss == pytest.approx(float(nll.mean()), abs=1e-5)


@pytest.mark.usefixtures("one_thread")
def test_cloning_recalls_demonstrator_with_memory_and_not_without(demonstrations):
    """Recall's demonstrator keeps the cue: with memory the clone does too (1.0 at seed 0); a feed-forward
    clone cannot see the cue when it chooses, and stays near 1/4."""
    rows, returns, ids = demonstrations
    figures = {}
    for memory in (True, False):
        bc = _bc(memory, actor_update_times=300, critic_update_times=300)
        bc.store_rows(rows.state(), rows.action, returns, episodes=ids)
        bc.update()
        figures[memory] = evaluate(bc, Recall, 200, seed=7).mean
    assert figures[True] >= 0.95 and figures[False] < 0.35, figures
