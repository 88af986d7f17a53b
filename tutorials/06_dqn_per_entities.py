"""Tutorial 6: DQNPer over entities: per-actor Q-values, masks and priorities.

    python tutorials/06_dqn_per_entities.py            # trains DQNPer on MineSweeper (51,200 steps)
    python tutorials/06_dqn_per_entities.py --smoke    # a tiny budget: checks that everything runs

What you learn:

* ``RogueNet(obs_space, action_space, config, q_head="dueling")`` gains ``q_values(entities,
  action_masks)``: one action value per choice per *actor*. A categorical action gives each
  actor ``n_choices`` values (MineSweeper: each robot ``[5]``, one per move); a select-entity
  action gives each actor one value per actee of its row (the orbital cannon: one per mine or
  robot it could fire at). ``"dueling"`` builds each value as a state value plus an advantage
  over the allowed choices; ``"plain"`` projects the actor's embedding directly.
* Masks are part of the values: a forbidden choice is ``-inf``. The greedy choice (its argmax),
  the epsilon-greedy exploration (a uniform *allowed* choice) and the target's max over the
  next state's choices therefore never take one. A network whose output is finite where the
  mask forbids is refused with an error naming the action and actor.
* A row's ``Q(s, a)`` is the sum over its actors of their values of the choices they took
  (``actor_reduction="mean"`` averages instead); the TD target is the reward (``n_step``
  rewards, here 1) plus the discounted sum of every next-state actor's best allowed value.
  Terminal rows do not bootstrap; truncated rows do.
* ``DQNPer`` samples rows in proportion to ``(|TD error| + 0.01) ** 0.6`` (a
  ``PrioritizedBuffer``), weights each row's loss by its importance weight and, after the
  step, writes the new ``|TD error|`` back as the rows' priorities.

The environment trained on is MineSweeper (two robots, five mines, a 6 x 6 grid, cut at 200
steps): the only reward, 1.0, comes when the last mine is defused, and a robot that steps on a
mine is lost. ``RolloutCollector`` steps 32 grids at once and stores each rollout with
``store_rollout`` (16-step returns computed from the stored steps, without copying states);
epsilon decays once per environment step through ``DQNPer.act``. The settings are those of the
bundled ``minesweeper-dqn.yaml``.

Result with the defaults (seed 0, one torch thread): the mean return over the last 100 training
episodes climbs from 0.07 (epsilon near 1) to 0.80 at 51,200 steps; the final evaluation
(100 episodes, epsilon-greedy at 0.1) reads 0.76 against a random policy's 0.11, after 166
seconds on a two-core machine busy with other work (load average 4).
"""
from __future__ import annotations

import argparse
import copy
import time
from typing import List, Optional

import numpy as np
import torch
from torch import nn

from entmachin.env import EnvList, TimeLimit, to_state
from entmachin.env.examples import MineSweeper
from entmachin.frame import DQNPer, RolloutCollector
from entmachin.frame.evaluate import evaluate
from entmachin.model import RelposEncodingConfig, RogueNet, RogueNetConfig
from entmachin.ragged.tensor import tree_to_torch
from entmachin.run.evaluation import random_policy_return

CONFIG = RogueNetConfig(d_model=32, n_layer=1, n_head=2, d_qk=16,
                        relpos_encoding=RelposEncodingConfig(extent=(5, 5), position_features=("x", "y")))


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=100, help="rollouts of 32 environments x 16 steps")
    parser.add_argument("--updates", type=int, default=32, help="update() calls (128 rows each) per rollout")
    parser.add_argument("--eval-episodes", type=int, default=100, help="episodes of the final evaluation")
    parser.add_argument("--seed", type=int, default=0, help="seeds torch, the frame and the environments")
    parser.add_argument("--smoke", action="store_true", help="tiny budget (2 rollouts, 2 updates each), to check it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.iterations, args.updates, args.eval_episodes = 2, 2, 10
    for name in ("iterations", "updates", "eval_episodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def show_q_values() -> None:
    """Part 1: the Q-values of one MineSweeper state, actor by actor, with its masks."""
    envs = EnvList(lambda: MineSweeper(orbital_cannon=True, cooldown_period=0), 1, seed=0)
    net = RogueNet(envs.obs_space(), envs.action_space(), CONFIG, q_head="dueling")
    state = tree_to_torch(to_state(envs.reset(), envs.action_space()))  # the canonical state of one row
    with torch.no_grad():
        q = net.q_values(state["entities"], state["action_masks"])  # action name -> ragged [n_actors, width]
    robots = state["entities"]["Robot"].data  # [n_robots, 2]: x, y
    print("Part 1: an untrained network's Q-values of one MineSweeper state (-inf: the mask forbids)")
    print(f"  Move: one row per robot, one value per choice {MineSweeper().action_space()['Move'].index_to_label}")
    for actor, values in enumerate(q["Move"].data):  # [5] each
        x, y = robots[actor].tolist()
        print(f"    robot at ({x:.0f}, {y:.0f}): " + "  ".join(f"{v:+.3f}" for v in values.tolist()))
    fire = q["Fire Orbital Cannon"].data  # [1, n_mines + n_robots]: one value per actee
    print(f"  Fire Orbital Cannon: one actor (the cannon), {fire.shape[1]} actees (the mines, then the robots)")
    print("    cannon: " + "  ".join(f"{v:+.3f}" for v in fire[0].tolist()))
    envs.close()


def train(args: argparse.Namespace) -> float:
    """Part 2: DQNPer on MineSweeper; returns the trained policy's mean return (``--eval-episodes``)."""
    torch.manual_seed(args.seed)
    make_env = lambda: TimeLimit(MineSweeper(), 200)  # noqa: E731 (no time limit of its own)
    envs = EnvList(make_env, 32, seed=args.seed)
    net = RogueNet(envs.obs_space(), envs.action_space(), CONFIG, q_head="dueling")
    # Machin's keywords (plus n_step and epsilon_min); the settings of minesweeper-dqn.yaml. The
    # criterion gives one loss per row: DQNPer weights each by its importance weight.
    dqn = DQNPer(net, copy.deepcopy(net), torch.optim.Adam, nn.MSELoss(reduction="none"), batch_size=128,
                 learning_rate=1e-3, discount=0.99, epsilon_decay=0.9999, epsilon_min=0.1, n_step=16,
                 update_rate=0.02, gradient_max=10.0, replay_size=100_000, seed=args.seed)
    collector = RolloutCollector(dqn, envs, n_steps=16)
    print(f"\nPart 2: DQNPer on MineSweeper, {args.iterations} rollouts of 32 environments x 16 steps, "
          f"{args.updates} updates of 128 rows after each")
    print(f"{'steps':>6} {'epsilon':>7} {'return':>7} {'TD loss':>8} {'mean Q':>7} {'importance weight':>17}")
    returns: List[float] = []
    started = time.perf_counter()
    for iteration in range(1, args.iterations + 1):
        returns.extend(collector.collect().episode_returns)
        for _ in range(args.updates):
            dqn.update()  # sample by priority, weighted loss, step, priorities <- |TD error|
        if iteration % 10 == 0 or iteration == args.iterations:
            recent = float(np.mean(returns[-100:])) if returns else float("nan")
            stats = dqn.last_update
            print(f"{collector.total_env_steps:>6} {dqn.epsilon:>7.3f} {recent:>7.3f} {stats.td_loss:>8.4f} "
                  f"{stats.q_values:>7.3f} {stats.importance_weight:>17.3f}")
    envs.close()
    # What the priorities do: rows the network predicts badly are drawn more often, and their
    # loss is weighted down by the importance weight (the largest weight of a batch is 1).
    _, _, index, weight = dqn.replay_buffer.sample_batch(1024, sample_attrs=["reward"])
    print(f"a batch of 1024 rows drawn by priority: {len(np.unique(index))} distinct rows, importance weights "
          f"{weight.min():.3f} to {weight.max():.3f}")
    # Epsilon-greedy at the final epsilon, as the runner evaluates: a purely greedy policy can
    # stall (two robots defusing empty cells until the time limit) where a little noise moves on.
    n = args.eval_episodes
    trained = evaluate(dqn, make_env, n, deterministic=False, seed=1000 + args.seed, num_envs=min(n, 50)).mean
    random = random_policy_return(make_env, n, seed=1000 + args.seed).mean  # as `entmachin train` reports it
    print(f"after {collector.total_env_steps} steps ({time.perf_counter() - started:.0f} s): mean return over {n} "
          f"episodes {trained:.2f} (a random policy: {random:.2f}; 1.0: every mine defused)")
    return trained


def main(argv: Optional[List[str]] = None) -> float:
    """Shows the Q-values of an entity state, then trains DQNPer; returns the trained mean return."""
    args = parse_args(argv)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        show_q_values()
        return train(args)
    finally:
        torch.set_num_threads(previous_threads)


if __name__ == "__main__":
    main()
