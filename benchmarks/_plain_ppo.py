"""PPO on MineSweeper written by hand, with no frame: the baseline of ``bench_frame_minesweeper.py``.

One loop in CleanRL's style over the same pieces the frame uses below it: ``EnvList``, ``trees``,
``to_state`` / ``to_vec_actions`` and ``RogueNet`` (actor and ``net.critic()`` sharing the
trunk, one Adam with the critic-only parameters in a second group, as the frame builds it).
The same mathematics as ``PPO``: one critic call over the rollout's states plus the
bootstrapping ones, GAE, old log-probabilities in one no-grad pass, per-actor ratios with each
actor getting its row's advantage (normalised per minibatch over rows that have actors), the
clipped surrogate, the entropy bonus, the value loss x 0.5, gradient clipping. What it leaves
out is what a framework adds: checks of the caller's data, a buffer, non-finite guards,
interrupt safety, checkpoints and statistics.

Phases are timed inline into ``spent`` with the names of the frame's table, on ``clock``
(``_device.clock``: synchronised wall time on CUDA). The network lives on ``device``; the
rollout's tensors go there once per iteration.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List

import numpy as np
import torch
from torch import nn

from entmachin.env import EnvList, to_state, to_vec_actions
from entmachin.env.examples import MineSweeper
from entmachin.model import RogueNet
from entmachin.model.input_norm import collecting_stats_of, input_norms
from entmachin.ragged import trees
from entmachin.ragged.tensor import RaggedTensor, to_ragged_tensor


@contextmanager
def _phase(spent: Dict[str, float], name: str, clock: Callable[[], float] = time.perf_counter) -> Iterator[None]:
    start = clock()
    try:
        yield
    finally:
        spent[name] += clock() - start


def _cat(states: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Row-wise concatenation of canonical states, each leaf then a ``RaggedTensor``."""
    def tensors(tree: Any) -> Any:
        return {k: tensors(v) for k, v in tree.items()} if isinstance(tree, dict) else to_ragged_tensor(tree)

    return tensors(trees.stack(states, lambda i: f"states[{i}]"))


def _units(per_action: Dict[str, RaggedTensor]) -> torch.Tensor:
    return torch.cat([rt.data.reshape(-1) for rt in per_action.values()])  # [n_units]


class PlainPPO:
    """The loop's state: environments, network, optimizer, the current observation."""

    def __init__(self, n_envs: int, n_steps: int, batch_size: int, epochs: int, seed: int = 0,
                 device: torch.device = torch.device("cpu"), clock: Callable[[], float] = time.perf_counter) -> None:
        self.envs = EnvList(MineSweeper, n_envs, seed=seed)
        self.space = self.envs.action_space()
        torch.manual_seed(seed)
        self.net = RogueNet(self.envs.obs_space(), self.space).to(device)
        self.norms = input_norms(self.net)  # found once
        self.critic = self.net.critic().to(device)
        self.device, self.clock = device, clock
        actor_params = list(self.net.parameters())
        ids = {id(p) for p in actor_params}
        groups = [{"params": actor_params, "lr": 1e-3}]
        critic_only = [p for p in self.critic.parameters() if id(p) not in ids]
        if critic_only:
            groups.append({"params": critic_only, "lr": 1e-3})
        self.params = actor_params + critic_only
        self.optimizer = torch.optim.Adam(groups, lr=1e-3, fused=True)
        self.net.eval()
        self.critic.eval()
        self.n_steps, self.batch_size, self.epochs = n_steps, batch_size, epochs
        self.rng = np.random.default_rng(seed)
        self.state = to_state(self.envs.reset(), self.space)

    def iteration(self, spent: Dict[str, float]) -> None:
        """One rollout of ``n_steps`` x ``n_envs`` rows and one update on it."""
        n_envs = len(self.envs)
        states, actions, rewards, dones = [], [], [], []
        for _ in range(self.n_steps):
            with _phase(spent, "acting", self.clock), torch.no_grad(), collecting_stats_of(self.norms):
                out = self.net(self.state["entities"], self.state["action_masks"])
                action = to_vec_actions(out.action)
            with _phase(spent, "env step", self.clock):
                obs = self.envs.act(action)
            with _phase(spent, "state conversion", self.clock):
                after = to_state(obs, self.space)
            states.append(self.state)
            actions.append({"action": action})
            rewards.append(np.asarray(obs.reward, dtype=np.float32))
            dones.append(np.asarray(obs.done, dtype=np.bool_))  # MineSweeper ends episodes, never truncates
            self.state = after
        with _phase(spent, "storing", self.clock):
            state = _cat(states + [self.state])  # T * B rows, then the B bootstrap rows
            with torch.no_grad():
                values = self.critic(state["entities"]).reshape(self.n_steps + 1, n_envs)  # [T + 1, B]
            reward = torch.from_numpy(np.stack(rewards)).to(self.device)  # [T, B]
            not_done = 1.0 - torch.from_numpy(np.stack(dones)).to(self.device).float()  # [T, B]
            advantage = torch.zeros_like(reward)  # [T, B]
            last = torch.zeros(n_envs, device=self.device)
            for t in reversed(range(self.n_steps)):
                delta = reward[t] + 0.99 * values[t + 1] * not_done[t] - values[t]
                last = delta + 0.99 * 0.95 * not_done[t] * last
                advantage[t] = last
            target = (advantage + values[:-1]).reshape(-1)  # [N]
            advantage = advantage.reshape(-1)  # [N]
            n_rows = self.n_steps * n_envs
            state = trees.take(state, np.arange(n_rows))
            action = _cat(actions)
        with _phase(spent, "update", self.clock):
            self._update(state, action, target, advantage, n_rows)

    def _update(self, state: Dict[str, Any], action: Dict[str, Any], target: torch.Tensor,
                advantage: torch.Tensor, n_rows: int) -> None:
        with torch.no_grad():
            old = self.net(state["entities"], state["action_masks"], action=action["action"]).log_prob
        per_epoch = max(1, -(-n_rows // self.batch_size))
        self.net.train()
        for _ in range(self.epochs):
            for rows in np.array_split(self.rng.permutation(n_rows), per_epoch):
                mb_state, mb_action = trees.take(state, rows), trees.take(action, rows)
                out, value = self.net.forward_with_value(mb_state["entities"], mb_state["action_masks"],
                                                         action=mb_action["action"])
                log_prob = _units(out.log_prob)  # [n_units]
                old_lp = _units({k: v[rows] for k, v in old.items()})  # [n_units]
                row = torch.cat([rt.batch_index for rt in out.log_prob.values()])  # [n_units]
                adv = advantage[torch.from_numpy(rows)]  # [b]
                has = torch.zeros(len(rows), dtype=torch.bool, device=adv.device)
                has[row] = True
                adv = (adv - adv[has].mean()) / (adv[has].std(unbiased=False) + 1e-8)
                adv = adv[row]  # [n_units]
                ratio = (log_prob - old_lp).exp()
                surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                entropy = _units(out.entropy).mean()
                value_loss = nn.functional.mse_loss(value.reshape(-1), target[torch.from_numpy(rows)]) * 0.5
                loss = -surrogate - 0.01 * entropy + value_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, 0.5)
                self.optimizer.step()
        self.net.eval()
