"""Small models, environments and reference computations shared by the frame tests."""
import numpy as np
import torch
from torch import nn

from entmachin.env import (
    CategoricalActionMask,
    CategoricalActionSpace,
    EnvList,
    Entity,
    Environment,
    Observation,
    ObsSpace,
    random_actions,
    to_state,
)
from entmachin.frame.a2c import A2C
from entmachin.frame.ppo import PPO
from entmachin.model import MLPActor, RogueNet, RogueNetConfig

D_STATE = 3


class LinearCritic(nn.Module):
    """``[B, D_STATE] -> [B, 1]``, easy to evaluate by hand."""

    def __init__(self, d_state: int = D_STATE):
        super().__init__()
        self.fc = nn.Linear(d_state, 1)

    def forward(self, state):
        return self.fc(state)


def dense_frame(cls=PPO, optimizer_factory=torch.optim.Adam, **kwargs):
    torch.manual_seed(0)
    kwargs.setdefault("seed", 0)
    return cls(MLPActor(D_STATE, 2, d_hidden=(8,)), LinearCritic(), optimizer_factory, nn.MSELoss(), **kwargs)


def dense_step(rng, terminal=False, truncated=None, n_rows=1, reward=None):
    """One transition of ``n_rows`` rows for a dense frame (scalars when ``n_rows == 1``)."""
    step = {
        "state": {"state": torch.from_numpy(rng.standard_normal((n_rows, D_STATE)).astype(np.float32))},
        "action": {"action": torch.from_numpy(rng.integers(0, 2, (n_rows, 1)))},
        "next_state": {"state": torch.from_numpy(rng.standard_normal((n_rows, D_STATE)).astype(np.float32))},
    }
    if n_rows == 1:
        step["reward"] = float(rng.standard_normal()) if reward is None else reward
        step["terminal"] = bool(terminal)
        if truncated is not None:
            step["truncated"] = bool(truncated)
    else:
        step["reward"] = rng.standard_normal(n_rows).astype(np.float32)
        step["terminal"] = np.asarray(terminal, dtype=bool) & np.ones(n_rows, dtype=bool)
        if truncated is not None:
            step["truncated"] = np.asarray(truncated, dtype=bool) & np.ones(n_rows, dtype=bool)
    return step


def dense_episode(rng, length=6, terminal=True):
    return [dense_step(rng, terminal=terminal and t == length - 1) for t in range(length)]


def reference_targets(critic, steps, discount, gae_lambda):
    """(returns, advantages) ``[T, B]`` by a plain loop over each column, as docs/architecture.md says."""
    def value(tree, b):
        return float(critic(tree["state"][b : b + 1]).reshape(()))

    def flag(step, key, b):
        v = step.get(key, False)
        return bool(np.asarray(v).reshape(-1)[b]) if not isinstance(v, bool) else v

    n_steps = len(steps)
    n_envs = steps[0]["state"]["state"].shape[0]
    adv = np.zeros((n_steps, n_envs))
    ret = np.zeros((n_steps, n_envs))
    with torch.no_grad():
        for b in range(n_envs):
            following = 0.0
            for t in reversed(range(n_steps)):
                step = steps[t]
                r = float(np.asarray(step["reward"], dtype=np.float64).reshape(-1)[b])
                v = value(step["state"], b)
                terminal, truncated = flag(step, "terminal", b), flag(step, "truncated", b)
                if terminal:
                    following = r - v
                elif truncated or t == n_steps - 1:
                    following = r + discount * value(step["next_state"], b) - v
                else:
                    delta = r + discount * value(steps[t + 1]["state"], b) - v
                    following = delta + discount * gae_lambda * following
                adv[t, b] = following
                ret[t, b] = following + v
    return ret, adv


def stored(frame):
    """Every stored row: ``(state, action, reward, terminal, truncated, value, gae)``."""
    n = frame.replay_buffer.size()
    _, values = frame.replay_buffer.sample_batch(
        n, sample_method="all",
        sample_attrs=["state", "action", "reward", "terminal", "truncated", "value", "gae"],
    )
    return values


class Sparse(Environment):
    """Entities ``A`` with a feature ``x``; each is an actor of ``move``; often a step has none.

    Reward: the number of actors that chose ``right``. Episodes last 4 steps (truncated).
    """

    def __init__(self):
        self.rng = np.random.default_rng()
        self.t = 0
        self.n_actors = 0

    def obs_space(self):
        return ObsSpace(entities={"A": Entity(["x"]), "B": Entity(["y"])})

    def action_space(self):
        return {"move": CategoricalActionSpace(["left", "right"])}

    def reset(self):
        self.t = 0
        return self._observe(0.0)

    def act(self, actions):
        reward = float(np.sum(np.asarray(actions["move"].indices) == 1)) if "move" in actions else 0.0
        self.t += 1
        return self._observe(reward)

    def _observe(self, reward):
        self.n_actors = int(self.rng.choice([0, 0, 1, 2]))
        return Observation(
            entities={
                "A": (self.rng.random((self.n_actors, 1)).astype(np.float32), [("A", i) for i in range(self.n_actors)]),
                "B": np.ones((1, 1), dtype=np.float32),
            },
            actions={"move": CategoricalActionMask(actor_types=["A"])},
            reward=reward,
            done=self.t >= 4,
            truncated=self.t >= 4,
        )


def small_net(envs, **config):
    torch.manual_seed(0)
    config.setdefault("d_model", 8)
    config.setdefault("n_layer", 1)
    config.setdefault("n_head", 1)
    config.setdefault("d_qk", 8)
    return RogueNet(envs.obs_space(), envs.action_space(), RogueNetConfig(**config))


def entity_frame(envs, cls=PPO, **kwargs):
    net = small_net(envs)
    kwargs.setdefault("seed", 0)
    return cls(net, net.critic(), torch.optim.Adam, nn.MSELoss(), **kwargs)


def entity_states(make_env, n_envs=3, n_steps=3, seed=0):
    """``n_steps + 1`` canonical states of ``n_envs`` environments under random actions."""
    from entmachin.env import random_actions

    envs = EnvList(make_env, n_envs, seed=seed)
    rng = np.random.default_rng(seed)
    obs = envs.reset()
    states = [to_state(obs, envs.action_space())]
    for _ in range(n_steps):
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        states.append(to_state(obs, envs.action_space()))
    return envs, states


__all__ = ["A2C", "PPO"]


def random_policy_returns(make_env, episodes, seed):
    """Mean return of uniformly random allowed actions over ``episodes`` episodes (50 environments)."""
    envs = EnvList(make_env, 50, seed=seed)
    rng = np.random.default_rng(seed)
    obs, running, returns = envs.reset(), np.zeros(50), []
    while len(returns) < episodes:
        obs = envs.act(random_actions(obs, envs.action_space(), rng))
        running += obs.reward
        returns.extend(running[obs.done].tolist())
        running[obs.done] = 0.0
    return float(np.mean(returns[:episodes]))


def cartpole_episode(env, act):
    """One episode of an unwrapped CartPole-v0 played as Machin's examples play it: cut at 200
    steps, ``act(state [1, 4]) -> action [1, 1]``. Returns ``(transitions, return, steps)``."""
    obs, _ = env.reset()
    state = torch.as_tensor(obs, dtype=torch.float32).reshape(1, 4)
    total, transitions = 0.0, []
    for step in range(1, 201):
        action = act(state)
        obs, reward, terminated, _, _ = env.step(int(action.item()))
        next_state = torch.as_tensor(obs, dtype=torch.float32).reshape(1, 4)
        total += reward
        transitions.append({
            "state": {"state": state}, "action": {"action": action}, "next_state": {"state": next_state},
            "reward": float(reward), "terminal": bool(terminated), "truncated": step == 200 and not terminated,
        })
        state = next_state
        if terminated:
            break
    return transitions, total, step
