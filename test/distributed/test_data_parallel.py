"""Data-parallel updates: ranks holding parts of a batch step as one frame holding all of it."""
import copy
import datetime
import threading

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn

from entmachin.env import EnvList
from entmachin.frame.a2c import A2C
from entmachin.distributed.collectives import Collectives, RankFailureError, report_failure
from entmachin.distributed.data_parallel import DataParallel
from entmachin.frame.ppo import PPO
from entmachin.frame.collector import RolloutCollector
from entmachin.model.input_norm import InputNorm
from entmachin.ragged import trees
from test.frame._frames import Sparse, dense_episode, dense_frame, entity_frame, small_net

N_ENVS, N_STEPS = 4, 4


def run_ranks(world_size, fn, timeout=20.0):
    """Runs ``fn(DataParallel)`` on ``world_size`` ranks, one thread each, over in-process gloo."""
    store = dist.HashStore()
    results, errors = [None] * world_size, [None] * world_size

    def body(rank):
        try:
            group = dist.ProcessGroupGloo(store, rank, world_size, datetime.timedelta(seconds=timeout))
            results[rank] = fn(DataParallel(Collectives(group, store=store, timeout=timeout)))
        except BaseException as e:  # handed to the test's thread
            errors[rank] = e

    threads = [threading.Thread(target=body, args=(rank,), daemon=True) for rank in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 10)
    for e in errors:
        if e is not None:
            raise e
    return results


def collected(cls, optimizer=None, **kwargs):
    """A frame (not yet holding rows) and the steps of one rollout of N_ENVS Sparse environments,
    some rows with 0, 1 or 2 actors."""
    kwargs = dict(batch_size=N_ENVS * N_STEPS, actor_update_times=1, critic_update_times=1, entropy_weight=-0.01,
                  **kwargs)
    if optimizer is None:
        frame = entity_frame(EnvList(Sparse, N_ENVS, seed=0), cls, **kwargs)
    else:
        net = small_net(EnvList(Sparse, N_ENVS, seed=0))
        frame = cls(net, net.critic(), optimizer, nn.MSELoss(), seed=0, **kwargs)
    captured = []
    envs = EnvList(Sparse, N_ENVS, seed=3)
    frame.store_rollout = captured.extend
    RolloutCollector(frame, envs, n_steps=N_STEPS).collect()
    del frame.store_rollout
    return frame, captured


def rows_of(steps, rows):
    index = np.asarray(rows, dtype=np.int64)
    out = []
    for step in steps:
        part = {key: trees.take(step[key], index) for key in ("state", "action", "next_state")}
        part.update({key: np.asarray(step[key])[index] for key in ("reward", "terminal", "truncated")})
        out.append(part)
    return out


def parameters(frame):
    return [p.detach().clone() for p in frame.actor.parameters()]


# Adam's first step is about lr * sign(gradient), blind to how the ranks' losses are weighted;
# SGD's step is the gradient itself, so it checks the weighting (policy, entropy, value).
@pytest.mark.parametrize("optimizer", [None, torch.optim.SGD], ids=["adam", "sgd"])
@pytest.mark.parametrize("extra", [{}, {"gradient_max": 0.05}], ids=["plain", "grad-clipped"])
@pytest.mark.parametrize("cls", [PPO, A2C])
def test_two_ranks_with_half_a_batch_each_step_as_one_rank_with_all_of_it(cls, optimizer, extra):
    lrs = {} if optimizer is None else {"actor_learning_rate": 0.1, "critic_learning_rate": 0.1}
    frame, steps = collected(cls, optimizer, **lrs, **extra)
    n_actors = [sum(len(s["action"]["action"]["move"][i]) for s in steps) for i in range(N_ENVS)]
    halves = [[0, 1], [2, 3]]
    assert len({sum(n_actors[i] for i in half) for half in halves}) == 2, "the halves should hold different actors"

    whole = copy.deepcopy(frame)
    whole.store_rollout(steps)
    whole.update()

    def rank_update(dp):
        mine = copy.deepcopy(frame)
        mine.data_parallel = dp
        mine.store_rollout(rows_of(steps, halves[dp.rank]))
        mine.update()
        return parameters(mine)

    ranks = run_ranks(2, rank_update)
    for expected, got0, got1 in zip(parameters(whole), *ranks):
        assert torch.equal(got0, got1)
        torch.testing.assert_close(got0, expected, rtol=0, atol=1e-6)
    moved = sum(float((a - b).abs().max()) for a, b in zip(parameters(whole), parameters(frame)))
    assert moved > 1e-4  # the update did something to compare


def test_world_size_one_gives_the_single_process_update():
    frame, steps = collected(PPO)
    alone = copy.deepcopy(frame)
    alone.store_rollout(steps)
    alone.update()

    def rank_update(dp):
        mine = copy.deepcopy(frame)
        mine.data_parallel = dp
        mine.store_rollout(steps)
        mine.update()
        return parameters(mine)

    (got,) = run_ranks(1, rank_update)
    for expected, value in zip(parameters(alone), got):
        torch.testing.assert_close(value, expected, rtol=0, atol=1e-6)


def test_dense_frames_with_a_summing_criterion_average_gradients_over_rows():
    def filled(rng_seed, episodes):
        # SGD: its step is the gradient, so a wrong weighting of the summed loss shows (Adam's would not)
        frame = dense_frame(PPO, torch.optim.SGD, batch_size=1000, actor_update_times=1, critic_update_times=1,
                            critic_learning_rate=0.01)
        frame.criterion = nn.MSELoss(reduction="sum")
        rng = np.random.default_rng(rng_seed)
        for _ in range(episodes):
            frame.store_episode(dense_episode(rng, 5))
        return frame

    whole = filled(0, 4)
    whole.update()
    rng = np.random.default_rng(0)
    episodes = [dense_episode(rng, 5) for _ in range(4)]
    frames = [filled(0, 0) for _ in range(2)]  # built here: torch's generator is shared by the threads
    for rank, frame in enumerate(frames):
        for episode in episodes[2 * rank : 2 * rank + 2]:
            frame.store_episode(episode)

    def rank_update(dp):
        mine = frames[dp.rank]
        mine.data_parallel = dp
        mine.update()
        return [p.detach().clone() for p in mine.critic.parameters()]

    ranks = run_ranks(2, rank_update)
    for expected, got0, got1 in zip(whole.critic.parameters(), *ranks):
        torch.testing.assert_close(got0, got1, rtol=0, atol=0)
        torch.testing.assert_close(got0, expected.detach(), rtol=0, atol=1e-6)


def test_a_non_finite_loss_on_one_rank_skips_the_step_on_every_rank():
    def rank_step(dp):
        p = nn.Parameter(torch.ones(3))
        loss = (p * (float("nan") if dp.rank == 1 else 1.0)).sum()
        loss.backward()
        dp.average_gradients([p], [loss])
        return p.grad

    grads = run_ranks(2, rank_step)
    assert all(bool(torch.isnan(g).all()) for g in grads)


def test_parameters_without_a_gradient_anywhere_keep_none():
    def rank_step(dp):
        used, unused, elsewhere = (nn.Parameter(torch.ones(2)) for _ in range(3))
        loss = used.sum() * (dp.rank + 1) + (elsewhere.sum() if dp.rank == 0 else 0.0)
        loss.backward()
        dp.average_gradients([used, unused, elsewhere], [loss])
        return used.grad, unused.grad, elsewhere.grad

    for used, unused, elsewhere in run_ranks(2, rank_step):
        assert torch.equal(used, torch.full((2,), 1.5))
        assert unused is None
        assert torch.equal(elsewhere, torch.full((2,), 0.5))


def test_broadcast_gives_every_rank_rank_zeros_weights():
    def rank_init(dp):
        torch.manual_seed(dp.rank)
        net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
        dp.broadcast_modules([net])
        return [t.clone() for t in net.state_dict().values()]

    first, second = run_ranks(2, rank_init)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_input_statistics_merge_every_ranks_items():
    data = torch.randn(2, 7, 3, dtype=torch.float64)
    start = torch.randn(5, 3, dtype=torch.float64)

    def rank_stats(dp):
        norm = InputNorm(3)
        norm.update(start)
        before = dp.snapshot_input_stats([norm])
        norm.update(data[dp.rank])
        dp.merge_input_stats([norm], before)
        return norm.count.item(), norm.mean.clone(), norm.squares_sum.clone()

    reference = InputNorm(3)
    reference.update(torch.cat([start, data[0], data[1]]))
    for count, mean, squares in run_ranks(2, rank_stats):
        assert count == 19
        torch.testing.assert_close(mean, reference.mean)
        torch.testing.assert_close(squares, reference.squares_sum)


def test_reduce_stats_averages_finite_values_over_ranks():
    frame = dense_frame(PPO)
    rng = np.random.default_rng(0)
    frame.store_episode(dense_episode(rng, 5))
    frame.update()
    stats = frame.last_update

    def rank_reduce(dp):
        mine = stats._replace(policy_loss=float(dp.rank), entropy=float("nan") if dp.rank else 2.0)
        return dp.reduce_stats(mine)

    for reduced in run_ranks(2, rank_reduce):
        assert reduced.policy_loss == 0.5 and reduced.entropy == 2.0
        assert reduced.skipped_steps == stats.skipped_steps  # the same steps on both ranks, counted once


def test_a_step_skipped_on_every_rank_counts_once():
    frame = dense_frame(PPO)
    frame.store_episode(dense_episode(np.random.default_rng(0), 5))
    frame.update()

    def rank_reduce(dp):
        return dp.reduce_stats(frame.last_update._replace(skipped_steps=[2, 1][dp.rank])).skipped_steps

    assert run_ranks(2, rank_reduce) == [2, 2]


def test_a_rank_that_reported_a_failure_is_named_by_the_others():
    def rank_body(dp):
        if dp.rank == 1:
            report_failure(dp.collectives.store, 1, "ValueError: environment exploded")
            return None
        dp.collectives.all_reduce_sum(torch.ones(1))

    with pytest.raises(RankFailureError, match=r"rank 0: the all-reduce .* failed because rank 1: ValueError: "
                                                r"environment exploded"):
        run_ranks(2, rank_body, timeout=2.0)


def test_the_collector_merges_before_the_rows_and_their_values_are_stored():
    """Data-parallel runs merge input statistics in ``before_store``: after the last step (so
    every step's statistics are in) and before ``store_rollout`` computes the rows' values."""
    frame = entity_frame(EnvList(Sparse, 2, seed=0), PPO, batch_size=4)
    events = []
    store = frame.store_rollout
    frame.store_rollout = lambda steps: (events.append(("store", len(steps))), store(steps))
    act = frame.act
    frame.act = lambda state: (events.append(("act",)), act(state))[1]
    collector = RolloutCollector(frame, EnvList(Sparse, 2, seed=1), n_steps=3,
                                 before_store=lambda: events.append(("merge",)))
    collector.collect()
    assert events == [("act",)] * 3 + [("merge",), ("store", 3)]


@pytest.mark.parametrize("reduction, row_weights", [("mean", (0.5, 1.5)), ("sum", (2.0, 2.0))])
def test_weigh_gives_every_rank_the_global_kl_and_its_share_of_the_minibatch(reduction, row_weights):
    """Rank 0 holds 1 actor in 2 rows, rank 1 3 actors in 6: policy and entropy are weighted by
    actors (1 x 2 / 4, 3 x 2 / 4), the value by rows (or by the world size for a summed loss), and
    both ranks get the actor-weighted KL, so that ``target_kl`` stops them at the same minibatch."""
    from entmachin.frame.gae import Losses

    def rank_weigh(dp):
        one = torch.tensor(1.0)
        losses = Losses(one, one, {}, one, torch.tensor([0.4, 0.0][dp.rank]), one)
        return dp.weigh(losses, [1, 3][dp.rank], [2, 6][dp.rank], nn.MSELoss(reduction=reduction))

    for rank, weighed in enumerate(run_ranks(2, rank_weigh)):
        unit_weight = (0.5, 1.5)[rank]
        assert float(weighed.policy) == float(weighed.entropy) == float(weighed.clip_fraction) == unit_weight
        assert float(weighed.value) == row_weights[rank]
        assert float(weighed.approx_kl) == pytest.approx(0.1)  # (0.4 x 1 + 0.0 x 3) / 4
