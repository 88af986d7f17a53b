"""A model checks what only it knows about stored rows through its own ``check_stored``
(``entmachin.frame.store_checks.StoredRowsCheck``): called at store time, its errors surface and
the refused call stores nothing; a model without the method is not asked."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

from entmachin.frame import DQN, PPO
from test.frame._frames import D_STATE, dense_episode, dense_step


class Unchecked(nn.Module):
    """A dense actor without checks of its own."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D_STATE, 2)

    def forward(self, state, action=None):
        dist = torch.distributions.Categorical(logits=self.fc(state))
        act = dist.sample() if action is None else action.reshape(-1).long()
        return act[:, None], dist.log_prob(act)[:, None], dist.entropy()[:, None]


class Checking(Unchecked):
    """The same actor, checking stored rows itself: the first feature of a state is never negative."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def check_stored(self, state, action, role, where):
        self.calls.append((role, sorted(state), sorted(action)))
        first = state["state"][:, 0]  # [N]
        if (first < 0).any():
            r = int(torch.nonzero(first < 0)[0, 0])
            name = where("state", "['state']", row=r)
            raise ValueError(f"{name} starts with {float(first[r])}; the {role} ({type(self).__name__}) takes no "
                             "negative first feature")


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D_STATE, 1)

    def forward(self, state):
        return self.fc(state)


def _positive(step):
    step["state"] = {"state": step["state"]["state"].abs()}
    step["next_state"] = {"state": step["next_state"]["state"].abs()}
    return step


def _negative_rollout(rng):
    steps = [_positive(dense_step(rng, n_rows=3)) for _ in range(2)]
    steps[1]["state"]["state"][2, 0] = -1.0
    return steps


@pytest.mark.parametrize("wrap", [False, True])
def test_a_model_check_runs_at_store_and_its_error_surfaces(wrap):
    actor = Checking()
    frame = PPO(nn.DataParallel(actor) if wrap else actor, Critic(), torch.optim.Adam, nn.MSELoss(), seed=0)
    rng = np.random.default_rng(0)
    frame.store_episode([_positive(s) for s in dense_episode(rng, 4)])
    assert actor.calls == [("actor", ["state"], ["action"])] and frame.replay_buffer.size() == 4
    with pytest.raises(ValueError, match=r"^PPO.store_rollout\[1\]\['state'\]\['state'\] row 2 starts with -1.0; "
                                         r"the actor \(Checking\) takes no negative first feature$"):
        frame.store_rollout(_negative_rollout(rng))
    assert frame.replay_buffer.size() == 4 and len(actor.calls) == 2  # refused whole


def test_a_model_without_a_check_is_not_asked():
    frame = PPO(Unchecked(), Critic(), torch.optim.Adam, nn.MSELoss(), seed=0)
    frame.store_rollout(_negative_rollout(np.random.default_rng(0)))
    assert frame.replay_buffer.size() == 6


class CheckingQ(nn.Module):
    """A dense Q-network with a check of its own that only records its calls."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D_STATE, 2)
        self.calls = []

    def forward(self, state):
        return self.fc(state)

    def check_stored(self, state, action, role, where):
        self.calls.append((role, where("action")))


def test_a_model_that_is_both_actor_and_critic_is_asked_once():
    q = CheckingQ()
    frame = DQN(q, copy.deepcopy(q), torch.optim.Adam, nn.MSELoss(), seed=0)
    frame.store_episode(dense_episode(np.random.default_rng(0), 3))
    assert q.calls == [("actor", "DQN.store_episode[0]['action']")]
