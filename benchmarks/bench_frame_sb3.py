"""PPO speed on CartPole-v1: entmachin against Stable-Baselines3 2.9.2, in the same run.

Workload (as in the frame issue): 8 environments, n_steps 256, batch 256, 4 epochs, 16,384
environment steps, one torch thread, SB3's ``MlpPolicy`` sizes on both sides (separate 64-64
tanh actor and critic), learning rate 3e-4, GAE lambda 0.95, clip 0.2, gradient norm 0.5.
entmachin collects through ``RolloutCollector`` (``store_rollout``) on ``GymnasiumVecEnv``
(the vectorised ``from_gymnasium``) of CartPole; SB3 learns on its ``DummyVecEnv``. The figure is environment
steps per second of the whole training loop (collection + updates); the mean return of the
last episodes is printed as a sanity check.

A third side, "plain PyTorch", is the same PPO written out by hand as one loop with no
framework at all (CleanRL's style: the eight environments stepped in a Python loop, one Adam
over both networks, no checks, no episode bookkeeping beyond returns). It is not a competitor
but a reference point: the speed any PPO on these environments and sizes can reach in this
interpreter with torch's per-call costs, so the distance of each framework from it is what the
framework itself costs. A table of seconds per phase (acting, env step, storing, update, other)
of entmachin's and the plain loop's best runs says where that cost lies.

A fourth side, "plain, same semantics", is the plain loop doing by hand the extra work that
entmachin's PPO does by its documented meaning (Machin's separate actor and critic optimizers,
each clipped on its own; old log-probabilities re-evaluated at the start of the update; the
approximate KL, clip fraction and entropy of each minibatch; one finiteness check per
minibatch). entmachin's speed against it is the framework's own cost; the plain loop's speed
against it is what those semantics cost.

A fifth side, "same semantics on GymnasiumVecEnv", is the contract floor: the same-semantics
loop stepping entmachin's ``GymnasiumVecEnv`` (a ``VecObs`` in and ``RaggedArrayI64`` actions
out per step, as the ``VecEnv`` contract has them), converting observations and actions by hand
and sampling as entmachin's heads do (``masked_categorical``'s exponential race, cheaper than
``torch.multinomial`` on 8 rows), with nothing of the framework around it. It is the fastest a
loop that keeps entmachin's environment contract and PPO semantics runs here; entmachin's
distance from it is the collector's, the frame's and ``safe_call``'s own cost.

SB3 runs in its own interpreter (``--sb3-python``, a venv with ``stable-baselines3==2.9.2``
beside torch 2.13), as a subprocess of this script::

    python benchmarks/bench_frame_sb3.py --sb3-python /tmp/sb3-venv/bin/python

Without ``--sb3-python`` the SB3 column reads "skipped". ``--device cuda`` puts every side's
networks (SB3's policy too) and the rollouts' tensors on the card; times are then wall clock
after ``torch.cuda.synchronize()``.
"""

import argparse
import json
import sys
from collections import defaultdict
from typing import Callable, Dict, List, Optional

import numpy as np
import torch
from _competitor import best_alternating, run_competitor
from _device import add_device_argument, checked_device, clock, describe
from _phases import time_collection
from torch import nn

N_ENVS, N_STEPS, BATCH, EPOCHS = 8, 256, 256, 4
# Seconds per phase of the entmachin and plain sides, in this order; "acting" includes turning
# observations into model inputs and actions back, "storing" the values and GAE.
PHASES = ("acting", "env step", "storing", "update", "other")


def _sb3(args: argparse.Namespace) -> Dict[str, float]:
    """Runs inside SB3's interpreter: one ``learn`` on a fresh model."""
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv

    envs = make_vec_env("CartPole-v1", n_envs=N_ENVS, seed=0, vec_env_cls=DummyVecEnv)
    model = PPO("MlpPolicy", envs, n_steps=N_STEPS, batch_size=BATCH, n_epochs=EPOCHS, seed=0, device=args.device,
                verbose=0)
    now = clock(torch.device(args.device))
    start = now()
    model.learn(total_timesteps=args.total_steps)
    seconds = now() - start
    returns = [info["r"] for info in model.ep_info_buffer]
    del gym
    return {"rate": model.num_timesteps / seconds, "return": float(np.mean(returns)) if returns else float("nan")}


def _entmachin(args: argparse.Namespace) -> Dict[str, float]:
    import gymnasium as gym

    from entmachin.env import GymnasiumVecEnv
    from entmachin.frame import PPO, RolloutCollector, global_actions, global_state
    from entmachin.model import MLPActor, MLPCritic

    torch.manual_seed(0)
    envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), N_ENVS, seed=0)
    device = torch.device(args.device)
    actor = MLPActor(4, 2, d_hidden=(64, 64), activation="tanh").to(device)
    critic = MLPCritic(4, d_hidden=(64, 64), activation="tanh").to(device)
    n_minibatches = EPOCHS * (N_ENVS * N_STEPS // BATCH)
    ppo = PPO(actor, critic, torch.optim.Adam, nn.MSELoss(), batch_size=BATCH, actor_update_times=n_minibatches,
              critic_update_times=n_minibatches, actor_learning_rate=3e-4, critic_learning_rate=3e-4,
              gae_lambda=0.95, discount=0.99, gradient_max=0.5, seed=0)
    collector = RolloutCollector(ppo, envs, n_steps=N_STEPS, state_fn=global_state, action_fn=global_actions())
    spent: Dict[str, float] = defaultdict(float)
    now = clock(device)
    update = time_collection(collector, spent, "acting", now)
    returns: List[float] = []
    start = now()
    while collector.total_env_steps < args.total_steps:
        returns.extend(collector.collect().episode_returns)
        update()
    seconds = now() - start
    spent["other"] = seconds - sum(spent.values())
    return {"rate": collector.total_env_steps / seconds, "return": float(np.mean(returns[-100:])), **spent}


def _plain(args: argparse.Namespace, contract: bool = False, vec_env: bool = False) -> Dict[str, float]:
    """The same PPO written by hand with no framework (see the module docstring).

    ``contract=True`` writes out, still by hand, the work entmachin's PPO does by its documented
    semantics beyond the minimal loop: Machin's separate actor and critic optimizers, each
    clipped to ``gradient_max`` on its own; old log-probabilities taken at the start of the
    update in batched passes (Machin's PPO re-evaluates the stored actions); each minibatch's
    approximate KL, clip fraction and mean entropy; and one finiteness check of the losses and
    gradient norms per minibatch (a non-finite step is skipped, not taken).

    ``vec_env=True`` (with ``contract``) is the contract floor of the module docstring: it steps
    entmachin's ``GymnasiumVecEnv`` instead of a loop over gymnasium environments and samples
    with entmachin's ``masked_categorical``.
    """
    import gymnasium as gym
    import torch.nn.functional as F

    def mlp(d_out: int) -> nn.Sequential:
        return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, d_out))

    torch.manual_seed(0)
    device = torch.device(args.device)
    now = clock(device)
    if vec_env:
        return _plain_on_vec_env(args, mlp, device)
    envs = [gym.make("CartPole-v1") for _ in range(N_ENVS)]
    obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)]).astype(np.float32)  # [B, 4]
    actor, critic = mlp(2).to(device), mlp(1).to(device)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-4, fused=True)
    actor_params, critic_params = list(actor.parameters()), list(critic.parameters())
    actor_optim = torch.optim.Adam(actor_params, lr=3e-4, fused=True)
    critic_optim = torch.optim.Adam(critic_params, lr=3e-4, fused=True)
    n_rows = N_STEPS * N_ENVS
    episode_return, returns, steps = np.zeros(N_ENVS), [], 0
    spent: Dict[str, float] = defaultdict(float)
    start = now()
    while steps < args.total_steps:
        states = np.zeros((N_STEPS, N_ENVS, 4), np.float32)  # [T, B, 4]
        actions = np.zeros((N_STEPS, N_ENVS), np.int64)  # [T, B]
        log_probs = np.zeros((N_STEPS, N_ENVS), np.float32)  # [T, B]
        rewards = np.zeros((N_STEPS, N_ENVS), np.float32)  # [T, B]
        dones = np.zeros((N_STEPS, N_ENVS), np.float32)  # [T, B]
        for t in range(N_STEPS):
            acting = now()
            states[t] = obs
            with torch.no_grad():
                log_p = F.log_softmax(actor(torch.from_numpy(obs).to(device)), dim=-1)  # [B, 2]
                action = torch.multinomial(log_p.exp(), 1)  # [B, 1]
                log_probs[t] = log_p.gather(1, action)[:, 0].cpu().numpy()
            actions[t] = action[:, 0].cpu().numpy()
            stepping = now()
            spent["acting"] += stepping - acting
            for i, env in enumerate(envs):
                o, r, terminated, truncated, _ = env.step(int(actions[t, i]))
                episode_return[i] += r
                if terminated or truncated:
                    returns.append(episode_return[i])
                    episode_return[i] = 0.0
                    o, _ = env.reset()
                obs[i], rewards[t, i], dones[t, i] = o, r, terminated or truncated
            spent["env step"] += now() - stepping
        steps += n_rows
        storing = now()
        with torch.no_grad():
            values = critic(torch.from_numpy(states.reshape(n_rows, 4)).to(device))  # [N, 1]
            values = values.reshape(N_STEPS, N_ENVS).cpu().numpy()  # [T, B]
            last = critic(torch.from_numpy(obs).to(device))[:, 0].cpu().numpy()  # [B]
        advantages = _gae(rewards, dones, values, last)  # [T, B]
        b_states = torch.from_numpy(states.reshape(n_rows, 4)).to(device)  # [N, 4]
        b_actions = torch.from_numpy(actions.reshape(n_rows, 1)).to(device)  # [N, 1]
        b_log_probs = torch.from_numpy(log_probs.reshape(n_rows)).to(device)  # [N]
        b_advantages = torch.from_numpy(advantages.reshape(n_rows)).to(device)  # [N]
        b_returns = torch.from_numpy((advantages + values).reshape(n_rows, 1)).to(device)  # [N, 1]
        updating = now()
        spent["storing"] += updating - storing
        if contract:
            _contract_update(actor, critic, actor_optim, critic_optim, b_states, b_actions, b_advantages, b_returns)
            spent["update"] += now() - updating
            continue
        for _ in range(EPOCHS):
            for rows in torch.randperm(n_rows).split(BATCH):
                log_p = F.log_softmax(actor(b_states[rows]), dim=-1)  # [b, 2]
                ratio = (log_p.gather(1, b_actions[rows])[:, 0] - b_log_probs[rows]).exp()  # [b]
                adv = b_advantages[rows]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # [b]
                policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                value_loss = F.mse_loss(critic(b_states[rows]), b_returns[rows])
                optimizer.zero_grad()
                (policy_loss + 0.5 * value_loss).backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                optimizer.step()
        spent["update"] += now() - updating
    seconds = now() - start
    spent["other"] = seconds - sum(spent.values())
    return {"rate": steps / seconds, "return": float(np.mean(returns[-100:])), **spent}


def _plain_on_vec_env(args: argparse.Namespace, mlp: Callable[[int], nn.Module], device: torch.device
                      ) -> Dict[str, float]:
    """``_plain(contract=True)`` stepping ``GymnasiumVecEnv`` (see ``_plain``'s ``vec_env``)."""
    import gymnasium as gym

    from entmachin.env import GymnasiumVecEnv
    from entmachin.model.heads import masked_categorical
    from entmachin.ragged.array import RaggedArrayI64

    envs = GymnasiumVecEnv(lambda: gym.make("CartPole-v1"), N_ENVS, seed=0)
    vec = envs.reset()
    ones = np.ones(N_ENVS, dtype=np.int64)  # [B]: one actor per row
    now = clock(device)
    actor, critic = mlp(2).to(device), mlp(1).to(device)
    actor_optim = torch.optim.Adam(actor.parameters(), lr=3e-4, fused=True)
    critic_optim = torch.optim.Adam(critic.parameters(), lr=3e-4, fused=True)
    n_rows = N_STEPS * N_ENVS
    episode_return, returns, steps = np.zeros(N_ENVS), [], 0
    spent: Dict[str, float] = defaultdict(float)
    start = now()
    while steps < args.total_steps:
        states = torch.zeros(N_STEPS, N_ENVS, 4, device=device)  # [T, B, 4]
        actions = torch.zeros(N_STEPS, N_ENVS, 1, dtype=torch.int64, device=device)  # [T, B, 1]
        rewards = np.zeros((N_STEPS, N_ENVS), np.float32)  # [T, B]
        dones = np.zeros((N_STEPS, N_ENVS), np.float32)  # [T, B]
        for t in range(N_STEPS):
            acting = now()
            obs = torch.from_numpy(vec.features["__global__"].as_array().copy()).to(device)  # [B, 4]
            states[t] = obs
            with torch.no_grad():
                action = masked_categorical(actor(obs), None, keepdim=True).action  # [B, 1]
                actions[t] = action
            chosen = {"action": RaggedArrayI64.from_flattened(action.cpu().numpy(), ones)}
            stepping = now()
            spent["acting"] += stepping - acting
            vec = envs.act(chosen)
            spent["env step"] += now() - stepping
            rewards[t], dones[t] = vec.reward, vec.done
            episode_return += vec.reward
            returns.extend(episode_return[vec.done])
            episode_return[vec.done] = 0.0
        steps += n_rows
        storing = now()
        with torch.no_grad():
            values = critic(states.reshape(n_rows, 4)).reshape(N_STEPS, N_ENVS).cpu().numpy()  # [T, B]
            last_obs = torch.from_numpy(vec.features["__global__"].as_array().copy()).to(device)  # [B, 4]
            last = critic(last_obs)[:, 0].cpu().numpy()  # [B]
        advantages = _gae(rewards, dones, values, last)  # [T, B]
        b_states = states.reshape(n_rows, 4)  # [N, 4]
        b_actions = actions.reshape(n_rows, 1)  # [N, 1]
        b_advantages = torch.from_numpy(advantages.reshape(n_rows)).to(device)  # [N]
        b_returns = torch.from_numpy((advantages + values).reshape(n_rows, 1)).to(device)  # [N, 1]
        updating = now()
        spent["storing"] += updating - storing
        _contract_update(actor, critic, actor_optim, critic_optim, b_states, b_actions, b_advantages, b_returns)
        spent["update"] += now() - updating
    seconds = now() - start
    spent["other"] = seconds - sum(spent.values())
    return {"rate": steps / seconds, "return": float(np.mean(returns[-100:])), **spent}


def _gae(rewards: np.ndarray, dones: np.ndarray, values: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The plain loops' GAE (discount 0.99, lambda 0.95): ``[T, B]`` advantages from ``[T, B]``
    rewards, dones and values and the ``[B]`` values after the last step."""
    advantages = np.zeros((N_STEPS, N_ENVS), np.float32)  # [T, B]
    gae = np.zeros(N_ENVS, np.float32)  # [B]
    for t in reversed(range(N_STEPS)):
        following = last if t == N_STEPS - 1 else values[t + 1]
        delta = rewards[t] + 0.99 * following * (1 - dones[t]) - values[t]
        gae = advantages[t] = delta + 0.99 * 0.95 * (1 - dones[t]) * gae
    return advantages


def _contract_update(actor: nn.Module, critic: nn.Module, actor_optim: torch.optim.Optimizer,
                     critic_optim: torch.optim.Optimizer, b_states: torch.Tensor, b_actions: torch.Tensor,
                     b_advantages: torch.Tensor, b_returns: torch.Tensor) -> None:
    """The plain loop's update with the work entmachin's PPO semantics add (see ``_plain``): the
    old log-probabilities re-evaluated in batched passes, then the epochs."""
    import torch.nn.functional as F

    with torch.no_grad():
        b_log_probs = torch.cat([
            F.log_softmax(actor(b_states[rows]), dim=-1).gather(1, b_actions[rows])[:, 0]
            for rows in torch.arange(b_states.shape[0], device=b_states.device).split(BATCH)])  # [N]
    actor_params, critic_params = list(actor.parameters()), list(critic.parameters())
    for _ in range(EPOCHS):
        for rows in torch.randperm(b_states.shape[0]).split(BATCH):
            log_p = F.log_softmax(actor(b_states[rows]), dim=-1)  # [b, 2]
            entropy = -(log_p.exp() * log_p).sum(-1).mean()
            log_ratio = log_p.gather(1, b_actions[rows])[:, 0] - b_log_probs[rows]  # [b]
            ratio = log_ratio.exp()  # [b]
            adv = b_advantages[rows]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # [b]
            with torch.no_grad():
                approx_kl = ((ratio - 1.0) - log_ratio).mean()
                clip_fraction = ((ratio - 1.0).abs() > 0.2).float().mean()
            policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
            value_loss = F.mse_loss(critic(b_states[rows]), b_returns[rows]) * 0.5
            actor_optim.zero_grad()
            critic_optim.zero_grad()
            (policy_loss + value_loss).backward()
            norms = [nn.utils.get_total_norm([p.grad for p in ps]) for ps in (actor_params, critic_params)]
            finite = torch.isfinite(torch.stack([policy_loss, value_loss, *norms])).tolist()  # one host sync
            for optim, ps, norm, ok in zip((actor_optim, critic_optim), (actor_params, critic_params), norms,
                                           (finite[0] and finite[2], finite[1] and finite[3])):
                if ok:
                    nn.utils.clip_grads_with_norm_(ps, 0.5, norm)
                    optim.step()
            del entropy, approx_kl, clip_fraction  # computed as the frame logs them


def _run_sb3(args: argparse.Namespace) -> Optional[Dict[str, float]]:
    if not args.sb3_python:
        return None
    return run_competitor(args.sb3_python, __file__, ["--sb3-worker", "--total-steps", str(args.total_steps),
                                                      "--device", args.device], "SB3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sb3-python", default=None, help="interpreter of a venv with stable-baselines3==2.9.2")
    parser.add_argument("--total-steps", type=int, default=16_384, help="environment steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side, alternating; the best is kept")
    parser.add_argument("--sb3-worker", action="store_true", help=argparse.SUPPRESS)
    add_device_argument(parser)
    args = parser.parse_args()
    device = checked_device(args.device)
    torch.set_num_threads(1)
    if args.sb3_worker:
        print(json.dumps(_sb3(args)))
        return

    # alternate the sides, keep the best run of each
    plain_runs: List[Dict[str, float]] = []
    contract_runs: List[Dict[str, float]] = []
    vec_env_runs: List[Dict[str, float]] = []

    def plain_then_ours() -> Dict[str, float]:
        plain_runs.append(_plain(args))
        contract_runs.append(_plain(args, contract=True))
        vec_env_runs.append(_plain(args, contract=True, vec_env=True))
        return _entmachin(args)

    ours, theirs = best_alternating(plain_then_ours, lambda: _run_sb3(args), args.repeats)
    plain = max(plain_runs, key=lambda figures: figures["rate"])
    contract = max(contract_runs, key=lambda figures: figures["rate"])
    on_vec_env = max(vec_env_runs, key=lambda figures: figures["rate"])
    print(f"PPO on CartPole-v1: {N_ENVS} envs, n_steps {N_STEPS}, batch {BATCH}, {EPOCHS} epochs, "
          f"{args.total_steps} steps, 64-64 tanh actor and critic, {describe(device)}, torch threads 1, best of "
          f"{args.repeats}")
    print(f"{'side':<22} {'steps/s':>10} {'of plain':>9} {'mean return (last episodes)':>29}")
    for side, figures in (("entmachin", ours), ("sb3", theirs), ("plain PyTorch", plain),
                          ("plain, same semantics", contract), ("contract floor", on_vec_env)):
        if figures is None:
            print(f"{side:<22} {'skipped':>10}")
        else:
            share = f"{figures['rate'] / plain['rate']:.0%}"
            print(f"{side:<22} {figures['rate']:>10,.0f} {share:>9} {figures['return']:>29.1f}")
    print(f"entmachin / plain PyTorch: {ours['rate'] / plain['rate']:.0%} (target >= 85%)")
    print(f"entmachin / plain with the same semantics: {ours['rate'] / contract['rate']:.0%} (the framework's own "
          "cost; the rest of the distance to the plain loop is what those semantics cost)")
    print(f"entmachin / the contract floor: {ours['rate'] / on_vec_env['rate']:.0%} (the collector's, the frame's and "
          f"safe_call's own cost); 85% of the plain loop is {0.85 * plain['rate'] / on_vec_env['rate']:.0%} of the floor")
    print(f"seconds per phase (best runs)  {'entmachin':>9} {'plain':>7} {'difference':>10} {'same semantics':>15} "
          f"{'floor':>10}")
    for phase in PHASES:
        print(f"  {phase:<27} {ours[phase]:>9.3f} {plain[phase]:>7.3f} {ours[phase] - plain[phase]:>+10.3f} "
              f"{contract[phase]:>15.3f} {on_vec_env[phase]:>10.3f}")
    if theirs is None:
        print("sb3: skipped (pass --sb3-python PATH to measure it)")
    else:
        print(f"ratio entmachin / sb3: {ours['rate'] / theirs['rate']:.2f}x (target: never below 1.2x); "
              f"plain PyTorch / sb3: {plain['rate'] / theirs['rate']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
