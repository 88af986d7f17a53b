"""The run config's defaults: settings that learn on an environment nobody has tuned for.

The frames' own constructors keep Machin's defaults (``gae_lambda=1.0``, no entropy term, no
gradient clipping), so Machin scripts behave as they did. A run config is different: a field it
leaves out takes the value below, chosen by ``benchmarks/sweep_defaults.py`` over the example
environments with their bundled configs replaced by these settings (its records are in
``benchmarks/results/sweep.jsonl``; ``--table-only`` prints the table). ``entmachin init``
writes them, and ``entmachin train package.module:Class`` trains with them directly.

``frame.batch_size`` left out splits one rollout's rows (``rollout.num_envs x rollout.n_steps``)
into minibatches of at most the value below and of (nearly) equal size: for PPO 256 of the default
512 rows, 192 of 384, all of 100; a changed rollout needs no second change.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping

__all__ = ["GENERIC", "GENERIC_MODEL", "DEFAULT_MAX_EPISODE_STEPS", "POSITIONS", "default_env_section",
           "frame_defaults", "model_defaults", "default_config"]

# Per frame: the frame fields a run config leaves out. (The rollout's defaults are its section's own,
# `RolloutSection` in entmachin/run/sections.py; the model's too, but for GENERIC_MODEL's.)
GENERIC: Dict[str, Dict[str, Any]] = {
    # PPO: a large entropy bonus (0.5), annealed to 0 with the learning rates over the run's budget (auto), with
    # two layers (GENERIC_MODEL). With a constant learning rate and a bonus of 0.01 the policy turned
    # deterministic early and stuck: Xor at 0.77 and PickMatchingBalls at 0.90 (medians of seeds 0-2, 500k steps);
    # with these both reach 1.0 and every other entity-gym target still holds.
    "PPO": {"n_epochs": 4, "batch_size": 256, "actor_learning_rate": 0.001, "critic_learning_rate": 0.001,
            "entropy_weight": -0.5, "anneal_entropy": True, "n_anneal_updates": "auto", "gae_lambda": 0.95,
            "discount": 0.99, "gradient_max": 0.5},
    # A2C: one pass over each rollout in minibatches of at most 128 rows. With the whole rollout as one
    # minibatch (512 rows) Count's 4,096-step budget was 8 gradient steps, and A2C stayed at the random
    # policy; 64-row minibatches learnt Count but collapsed MineSweeper (0.00 at 1M steps, seed 0).
    "A2C": {"n_epochs": 1, "batch_size": 128, "actor_learning_rate": 0.001, "critic_learning_rate": 0.001,
            "entropy_weight": -0.01, "gae_lambda": 0.95, "discount": 0.99, "gradient_max": 0.5},
    "BC": {"n_epochs": 1, "batch_size": 256, "actor_learning_rate": 0.001, "critic_learning_rate": 0.001,
           "discount": 0.99, "gradient_max": 0.5},
}

# Per frame: the model fields a run config leaves out, over the model section's own defaults (a RogueNet's;
# a dense network has no layers to count). PPO's bonus above unsticks Xor with two layers, not with one
# (0.91 median, seeds stuck at 0.84 and 0.91).
GENERIC_MODEL: Dict[str, Dict[str, Any]] = {"PPO": {"n_layer": 2}}

# Where at least two entity types have features with these names, the defaults add
# relative-position attention over them (as the bundled MineSweeper, MultiSnake and FloorIsLava
# configs do): positions given in absolute coordinates cannot be compared otherwise.
POSITIONS = ("x", "y")
RELPOS_EXTENT = (5, 5)

# The step limit `entmachin init` writes for an environment class that declares none
# (a class declares one with a `max_episode_steps` attribute).
DEFAULT_MAX_EPISODE_STEPS = 1000


def default_env_section(name: str, cls: Any) -> Dict[str, Any]:
    """The env section of an environment without a bundled config: its name and its step limit
    (the class's own ``max_episode_steps`` where it declares one, else
    :data:`DEFAULT_MAX_EPISODE_STEPS`)."""
    return {"name": name, "max_episode_steps": getattr(cls, "max_episode_steps", DEFAULT_MAX_EPISODE_STEPS)}


def frame_defaults(frame: Mapping[str, Any], rows: int) -> Dict[str, Any]:
    """The frame section ``frame`` with every field of :data:`GENERIC` it leaves out filled in
    (``rows``: one rollout's rows, which bound the default batch size). The default annealing of the
    entropy bonus applies where there is a bonus and a schedule to anneal it over: a section that
    states ``entropy_weight: null`` or ``n_anneal_updates: null`` keeps its bonus (or none) constant."""
    own = dict(GENERIC.get(frame.get("name", "PPO"), {}))
    if "batch_size" in own:  # the rollout in ceil(rows / batch_size) minibatches of (nearly) equal size
        own["batch_size"] = math.ceil(rows / math.ceil(rows / own["batch_size"]))
    filled = {**own, **frame}
    if "anneal_entropy" in own and "anneal_entropy" not in frame and \
            (filled.get("entropy_weight") is None or filled.get("n_anneal_updates") is None):
        del filled["anneal_entropy"]
    return filled


def model_defaults(model: Any, frame: str) -> Any:
    """The model section ``model`` with every field of :data:`GENERIC_MODEL` for ``frame`` it leaves out
    filled in, where the model is a RogueNet (anything but a mapping is returned as it is, for the
    loader to name)."""
    own = GENERIC_MODEL.get(frame, {})
    if not own or not isinstance(model, Mapping) or model.get("kind", "rogue_net") != "rogue_net":
        return model
    return {**own, **model}


def default_config(env: Mapping[str, Any], frame: str, obs_space: Any) -> Dict[str, Any]:
    """Plain config data for the ``env`` section and ``frame`` with everything else left to the
    defaults, plus relative positions where ``obs_space`` (the environment's ``ObsSpace``) has
    :data:`POSITIONS` on two entity types or more."""
    data: Dict[str, Any] = {"env": dict(env), "frame": {"name": frame}}
    placed = [name for name, entity in obs_space.entities.items() if set(POSITIONS) <= set(entity.features)]
    if len(placed) >= 2:
        data["model"] = {"relpos_encoding": {"extent": list(RELPOS_EXTENT), "position_features": list(POSITIONS)}}
    return data
