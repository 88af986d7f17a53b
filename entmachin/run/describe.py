"""One line of documentation per run-config field, and the commented YAML ``entmachin init`` writes."""
from __future__ import annotations

from typing import Any, Dict, Mapping

import yaml

__all__ = ["FIELD_DOCS", "commented_yaml"]

FIELD_DOCS: Dict[str, str] = {
    "env": "the environment",
    "env.name": "a name from `entmachin envs`, or 'package.module:Class' for your own",
    "env.kwargs": "keyword arguments of the environment's constructor",
    "env.max_episode_steps": "episodes are cut (truncated, bootstrapped) after this many steps; null: never",
    "env.check_finite": "stop with an error naming the feature when an observation or reward is NaN or infinite",
    "model": "RogueNet, the entity transformer (actor), and its critic",
    "model.d_model": "width of the entity embeddings and the residual stream",
    "model.n_layer": "transformer blocks",
    "model.n_head": "attention heads (must divide d_model)",
    "model.d_qk": "query/key width of select-entity heads",
    "model.embd_pdrop": "dropout on the embeddings",
    "model.resid_pdrop": "dropout on each residual branch",
    "model.attn_pdrop": "dropout on the attention weights",
    "model.pooling": "null: attention; mean / max / meanmax: pool each observation's entities instead",
    "model.relpos_encoding": "relative-position attention, e.g. {extent: [5, 5], position_features: [x, y]}",
    "model.translation": "move positions so a reference entity sits at the origin, e.g. {reference_entity: "
                         "Player, position_features: [x, y]}",
    "model.input_clip": "normalised inputs are clipped to [-input_clip, input_clip]",
    "model.critic": "separate: the critic is its own RogueNet; shared: it shares the actor's network",
    "model.q_head": "DQN frames: plain Q-heads, or dueling (value + advantage streams)",
    "frame": "the algorithm (Machin's keyword names)",
    "frame.name": "PPO, A2C, DQN or DQNPer",
    "frame.n_epochs": "passes over each rollout; sets actor/critic_update_times (null: give those instead)",
    "frame.optimizer": "a torch.optim class name or import path",
    "frame.batch_size": "rows per minibatch (at most rollout.num_envs x rollout.n_steps)",
    "frame.actor_update_times": "policy minibatch steps per update (used when n_epochs is null)",
    "frame.critic_update_times": "value minibatch steps per update (used when n_epochs is null)",
    "frame.actor_learning_rate": "learning rate of the actor (of both with model.critic: shared)",
    "frame.critic_learning_rate": "learning rate of a separate critic",
    "frame.entropy_weight": "Machin's sign: negative rewards entropy (e.g. -0.01); null: no entropy term",
    "frame.value_weight": "weight of the value loss",
    "frame.gradient_max": "gradients are clipped to this norm (.inf: no clipping)",
    "frame.gae_lambda": "GAE's lambda (1: Monte Carlo returns, 0: one-step TD)",
    "frame.discount": "discount factor gamma",
    "frame.normalize_advantage": "normalise advantages per minibatch",
    "frame.replay_device": "device of the rollout buffer",
    "frame.visualize": "write the autograd graph of the first update's losses",
    "frame.visualize_dir": "where visualize writes it",
    "frame.value_clip": "clip value updates to this distance from the old value; null: no clipping",
    "frame.target_kl": "stop an update early when the approximate KL passes this; null: never",
    "frame.n_anneal_updates": "learning rates fall linearly to 0 over this many updates; null: constant",
    "frame.anneal_entropy": "entropy_weight falls to 0 with the learning rates (needs n_anneal_updates)",
    "frame.surrogate_loss_clip": "PPO's clip range epsilon",
    "frame.n_updates": "DQN / DQNPer: update() calls (one sampled batch each) per rollout",
    "frame.epsilon_decay": "DQN: epsilon is multiplied by this once per environment step",
    "frame.update_rate": "DQN: soft target update rate per update (null: use update_steps)",
    "frame.update_steps": "DQN: copy the Q-network into the target every this many updates (null: update_rate)",
    "frame.learning_rate": "DQN: learning rate of the Q-network",
    "frame.replay_size": "DQN: rows the replay buffer keeps (the oldest are overwritten)",
    "frame.mode": "DQN: double, fixed_target or vanilla",
    "frame.epsilon": "DQN: initial exploration rate",
    "frame.epsilon_min": "DQN: epsilon never decays below this",
    "frame.n_step": "DQN: rewards summed before bootstrapping (n-step returns)",
    "frame.actor_reduction": "DQN: an action's value over its actors: sum or mean",
    "rollout": "how experience is collected",
    "rollout.n_steps": "steps per environment in each rollout (one update per rollout)",
    "rollout.num_envs": "environments stepped together (per rank under torchrun)",
    "rollout.processes": "0: step in this process (EnvList); N: N worker processes (ParallelEnvList, or Ray workers)",
    "rollout.workers": "null: workers on this machine; auto: a local Ray; ray://ADDRESS: a Ray cluster (entmachin[ray])",
    "train": "the training run",
    "train.total_steps": "environment steps to train for",
    "train.seed": "the one seed: torch's, the frame's, the environments' and evaluation's derive from it",
    "train.device": "device of the networks (cpu, cuda, cuda:1, ...)",
    "train.threads": "torch CPU threads; 1 makes a seed's run repeat exactly",
    "log": "the run directory and what goes in it",
    "log.run_dir": "where the run lives; null: runs/<env>-<date>-<time>",
    "log.checkpoint_interval": "environment steps between checkpoints (one is also written at the end)",
    "log.keep_checkpoints": "the latest checkpoints kept (older ones are deleted; the final one is the latest); "
                            "null: keep all",
    "log.eval_interval": "environment steps between evaluations (one also runs at the end)",
    "log.eval_episodes": "episodes per evaluation",
    "log.eval_deterministic": "evaluate the most likely actions instead of sampling",
    "log.eval_max_steps": "an evaluation episode still running after this many steps counts as it stands; "
                          "null: env.max_episode_steps, or 1000 without one",
    "distributed": "data-parallel ranks under torchrun (one process: unused)",
    "distributed.backend": "auto: gloo on CPU, nccl on CUDA; or gloo / nccl",
    "distributed.timeout": "seconds a rank waits for the others before stopping with an error naming the failed rank",
}


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()


def commented_yaml(data: Mapping[str, Any], header: str = "") -> str:
    """YAML text of plain config data with each field's one-line comment from :data:`FIELD_DOCS`."""
    lines = [header.rstrip()] if header else []
    for section, values in data.items():
        lines.append(f"{section}:  # {FIELD_DOCS.get(section, '')}".rstrip(" #"))
        for key, value in values.items():
            doc = FIELD_DOCS.get(f"{section}.{key}", "")
            lines.append(f"  {key}: {_scalar(value)}" + (f"  # {doc}" if doc else ""))
        lines.append("")
    return "\n".join(lines)
