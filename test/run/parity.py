"""Parity of an exported policy with the PyTorch network it came from (used by test_export.py
and by ``python -m test.run.parity`` to print the full table).

A network built from a bundled config gets random weights (larger than its initialisation, so
that probabilities are far from uniform) and input statistics from the environment's own
observations; it is then exported and both are run on observations of the environment (random
play) and on synthetic ones (random features, zero entities of a type, entity counts up to
three times the largest the environment showed, random actors, actees, masks, bounds and
visibility). A continuous action's deterministic value (``point``) and its distribution's
parameters are compared with the network's (``deterministic=True``, and what its head's linear
layer gave), and values ``OnnxPolicy`` samples must lie within every actor's bounds.
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from entmachin.deploy import OnnxPolicy
from entmachin.env import (
    GLOBAL_ENTITY, Environment, EnvList, GlobalContinuousActionMask, GlobalContinuousActionSpace, Observation,
    ObsSpace, SelectEntityActionSpace, VecCategoricalActionMask, VecObs, VecSelectEntityActionMask, random_actions,
    to_state,
)
from entmachin.env.action import CONTINUOUS_SPACES, GLOBAL_SPACES
from entmachin.env.vec_env import VecContinuousActionMask, has_global_entity
from entmachin.model.continuous import ContinuousHead, beta_parameters, gaussian_parameters
from entmachin.ragged.arrays import ragged_from_arrays
from entmachin.run.build import make_frame
from entmachin.run.envs import EnvFactory
from entmachin.run.config import apply_overrides, config_from_dict, load_config
from entmachin.run.export import _acting_model, export_policy, inverse_cdf_sample
from entmachin.run.paths import bundled_config_path

TOLERANCE = 1e-5


@dataclass
class Parity:
    """One environment's comparison (every action together).

    ``actors`` counts the actors of discrete actions and ``max_abs_diff`` their probabilities (or
    Q-values); ``values`` counts the actor values of continuous actions and ``continuous_diff``
    their deterministic points' and parameters' largest difference; ``out_of_bounds`` the sampled
    values outside their actor's bounds (or not float32).
    """

    name: str
    observations: int
    actors: int
    max_abs_diff: float
    argmax_equal: int
    argmax_ties: int
    sample_equal: int
    sample_ties: int
    mismatches: int  # argmax or sample differences that are not ties: must be 0
    export_seconds: float
    file_bytes: int
    values: int = 0
    continuous_diff: float = 0.0
    out_of_bounds: int = 0  # must be 0

    def sampled(self) -> str:
        if not self.actors:
            return "-"
        q = self.sample_equal + self.sample_ties == 0
        return "greedy (Q)" if q else f"{self.sample_equal} (+{self.sample_ties} ties)"

    def continuous(self) -> str:
        if not self.values:
            return "-"
        return f"{self.values}: {self.continuous_diff:.1e}, {self.out_of_bounds} sampled out of bounds"

    def row(self) -> str:
        return (f"| {self.name} | {self.observations} | {self.actors} | {self.max_abs_diff:.1e} | "
                f"{self.argmax_equal} (+{self.argmax_ties} ties) | {self.sampled()} | "
                f"{self.mismatches} | {self.continuous()} | {self.export_seconds:.2f} s | "
                f"{self.file_bytes / 1024:.0f} KiB |")


HEADER = ("| environment | observations | actors | max abs diff | argmax equal | sample equal | mismatches | "
          "continuous values: max abs diff, sampled | export | file |\n|---|---|---|---|---|---|---|---|---|---|")


class Swing(Environment):
    """A pendulum seen through global features only and swung by one global continuous torque: the
    shape of a gymnasium ``Pendulum-v1`` adapted by ``from_gymnasium`` (a network whose only token
    is ``__global__``), without gymnasium. Reward: ``-(angle^2 + 0.1 velocity^2)``; 20 steps."""

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["cos", "sin", "velocity"])

    def action_space(self) -> Dict[str, Any]:
        return {"torque": GlobalContinuousActionSpace(-2.0, 2.0, names=["torque"])}

    def reset(self) -> Observation:
        self.angle, self.velocity, self.t = float(self.rng.uniform(-math.pi, math.pi)), 0.0, 0
        return self._obs(0.0)

    def _obs(self, reward: float) -> Observation:
        return Observation(features={}, ids={}, global_features=[math.cos(self.angle), math.sin(self.angle),
                                                                  self.velocity],
                           actions={"torque": GlobalContinuousActionMask()}, done=self.t >= 20, reward=reward)

    def act(self, actions: Dict[str, Any]) -> Observation:
        self.t += 1
        self.velocity = float(np.clip(self.velocity + 0.15 * (actions["torque"]["torque"] + 10 * math.sin(self.angle)),
                                      -8.0, 8.0))
        self.angle = (self.angle + 0.05 * self.velocity + math.pi) % (2 * math.pi) - math.pi
        return self._obs(-(self.angle ** 2 + 0.1 * self.velocity ** 2))


def _randomise(net: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.2)


def env_batches(factory: EnvFactory, n_rows: int, seed: int, n_envs: int = 32) -> List[VecObs]:
    """Observations of random play, in batches of one step of ``n_envs`` environments (their seats)."""
    envs = EnvList(factory, n_envs, seed=seed)
    rng = np.random.default_rng(seed)
    try:
        obs, batches, seen = envs.reset(), [], 0
        space = envs.action_space()
        while seen < n_rows:
            batches.append(obs)
            seen += len(obs)
            obs = envs.act(random_actions(obs, space, rng))
        return batches
    finally:
        envs.close()


def synthetic_batch(obs_space: Any, action_space: Any, n_rows: int, most: Dict[str, int],
                    rng: np.random.Generator) -> VecObs:
    """Random rows: features N(0, 3), 0 .. 3 x ``most[t]`` + 2 entities of each type (a quarter of
    them none), random visibility, actors, actees and masks (every actor with an allowed choice),
    and continuous bounds within the space's (some fixed, some the space's own; half the batches
    without bounds, i.e. the space's for every actor)."""
    features, visible, lengths = {}, {}, {}
    for t, entity in obs_space.entities.items():
        n = rng.integers(0, 3 * most.get(t, 1) + 3, n_rows) * (rng.random(n_rows) > 0.25)
        lengths[t] = n
        features[t] = ragged_from_arrays(rng.normal(0, 3, (int(n.sum()), len(entity.features))).astype(np.float32),
                                         n, np.float32)
        if rng.random() < 0.5:
            visible[t] = ragged_from_arrays(rng.random((int(n.sum()), 1)) < 0.7, n, np.bool_)
    counts = sum(lengths.values()) if lengths else np.zeros(n_rows, np.int64)
    if has_global_entity(obs_space, action_space):
        g = len(obs_space.global_features)
        features[GLOBAL_ENTITY] = ragged_from_arrays(rng.normal(0, 3, (n_rows, g)).astype(np.float32),
                                                     np.ones(n_rows, np.int64), np.float32)
    masks = {}
    for name, space in action_space.items():
        actors, actor_n, actees, actee_n, allowed = [], [], [], [], []
        for r in range(n_rows):
            if isinstance(space, GLOBAL_SPACES):
                chosen = np.array([counts[r]] if rng.random() < 0.9 else [], np.int64)
            else:
                chosen = np.flatnonzero(rng.random(counts[r]) < 0.4)
            if isinstance(space, CONTINUOUS_SPACES):
                allowed.append(_random_bounds(space, len(chosen), rng))
            elif isinstance(space, SelectEntityActionSpace):
                targets = np.flatnonzero(rng.random(counts[r]) < 0.6) if len(chosen) else np.zeros(0, np.int64)
                if len(chosen) and not len(targets):
                    targets = np.array([rng.integers(counts[r])])
                pairs = rng.random((len(chosen), len(targets))) < 0.6
                if pairs.size:
                    pairs[np.arange(len(chosen)), rng.integers(0, len(targets), len(chosen))] = True
                actees.append(targets)
                actee_n.append(len(targets))
                allowed.append(pairs.reshape(-1, 1))
            else:
                pairs = rng.random((len(chosen), len(space.index_to_label))) < 0.6
                pairs[np.arange(len(chosen)), rng.integers(0, len(space.index_to_label), len(chosen))] = True
                allowed.append(pairs)
            actors.append(chosen)
            actor_n.append(len(chosen))
        actor_r = ragged_from_arrays(np.concatenate(actors).reshape(-1, 1).astype(np.int64), actor_n, np.int64)
        if isinstance(space, CONTINUOUS_SPACES):
            low, high = (ragged_from_arrays(np.concatenate([b[side] for b in allowed]), actor_n, np.float32)
                         for side in (0, 1))
            masks[name] = VecContinuousActionMask(actor_r, low, high) if rng.random() < 0.5 else \
                VecContinuousActionMask(actor_r)
        elif isinstance(space, SelectEntityActionSpace):
            masks[name] = VecSelectEntityActionMask(
                actor_r, ragged_from_arrays(np.concatenate(actees).reshape(-1, 1).astype(np.int64), actee_n, np.int64),
                ragged_from_arrays(np.concatenate(allowed), [len(a) for a in allowed], np.bool_))
        else:
            masks[name] = VecCategoricalActionMask(
                actor_r, ragged_from_arrays(np.concatenate(allowed), actor_n, np.bool_))
    return VecObs(features=features, visible=visible, action_masks=masks, reward=np.zeros(n_rows, np.float32),
                  done=np.zeros(n_rows, np.bool_), metrics={})


def _random_bounds(space: Any, n_actors: int, rng: np.random.Generator) -> tuple:
    """float32 ``(low, high)`` ``[n_actors, n_values]`` within ``space``'s: random sub-intervals, a
    tenth of them a point (a fixed value), a fifth the space's own."""
    shape = (n_actors, len(space))
    ends = np.sort(space.low + rng.random((2, *shape)) * (space.high - space.low), axis=0).astype(np.float32)
    ends[1] = np.where(rng.random(shape) < 0.1, ends[0], ends[1])
    whole = rng.random(shape) < 0.2
    low = np.where(whole, space.low, ends[0]).astype(np.float32)
    high = np.where(whole, space.high, ends[1]).astype(np.float32)
    return low, high


def _torch_values(net: Any, q: bool, state: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    """The discrete actions' probability (or Q-value) tables."""
    masks = {name: mask for name, mask in state["action_masks"].items()
             if not isinstance(net.action_space[name], CONTINUOUS_SPACES)}
    if not masks:
        return {}
    with torch.no_grad():
        fn = net.q_values if q else net.probabilities
        return {name: value.data.cpu() for name, value in fn(state["entities"], masks, state.get("visible")).items()}


def _torch_continuous(net: Any, state: Dict[str, Any]) -> Dict[str, Dict[str, np.ndarray]]:
    """Each continuous action's ``point`` (the network's ``deterministic=True`` action) and its
    distribution's parameters (``alpha``, ``beta`` or ``mean``, ``log_std``), ``[n_actors, n_values]``
    each, as the graph names them; the raw parameters are what the head's linear layer gave."""
    heads = {name: head for name, head in zip(net.action_names, net.heads) if isinstance(head, ContinuousHead)}
    if not heads:
        return {}
    raw: Dict[str, torch.Tensor] = {}
    hooks = [head.proj.register_forward_hook(lambda module, args, out, name=name: raw.__setitem__(name, out))
             for name, head in heads.items()]
    try:
        with torch.no_grad():
            out = net(state["entities"], state["action_masks"], state.get("visible"), deterministic=True)
    finally:
        for hook in hooks:
            hook.remove()
    result = {}
    for name, head in heads.items():
        if head.distribution == "beta":
            first, second = beta_parameters(raw[name])
            labels = ("alpha", "beta")
        else:
            first, second = gaussian_parameters(raw[name])
            labels = ("mean", "log_std")
        result[name] = {"point": out.action[name].data.cpu().numpy(), labels[0]: first.cpu().numpy(),
                        labels[1]: second.cpu().numpy()}
    return result


def _compare_continuous(name: str, policy: OnnxPolicy, vec: VecObs, state: Dict[str, Any], out: Dict[str, Any],
                        theirs: Dict[str, Dict[str, np.ndarray]], sampled: Dict[str, Any]) -> tuple:
    """``(values compared, largest difference, sampled values out of bounds)`` of ``vec``'s
    continuous actions."""
    n_values, diff, outside = 0, 0.0, 0
    for a, reference in theirs.items():
        for label, value in reference.items():
            ours = out[f"{label}/{a}"]
            assert ours.shape == value.shape, f"{name}/{a}: {label} has shape {ours.shape}, torch {value.shape}"
            diff = max(diff, float(np.max(np.abs(ours - value), initial=0.0)))
        low, high = (state["action_masks"][a][side].as_array() for side in ("low", "high"))
        values = sampled[a]
        drawn = values.as_array()
        assert np.array_equal(values.size1(), vec.action_masks[a].actors.size1()), f"{name}/{a}: rows differ"
        outside += int((drawn < low).sum() + (drawn > high).sum() + (~np.isfinite(drawn)).sum()) \
            if drawn.dtype == np.float32 else drawn.size
        n_values += reference["point"].size
    return n_values, diff, outside


def _allowed(space: Any, state_mask: Dict[str, Any], width: int, counts: np.ndarray) -> np.ndarray:
    """bool ``[n_actors, width]`` of the torch layout."""
    if not isinstance(space, SelectEntityActionSpace):
        return state_mask["mask"].as_array()
    flat = state_mask["actee_mask"].as_array().reshape(-1)
    out = np.zeros((len(counts), width), np.bool_)
    start = 0
    for a, c in enumerate(counts):
        out[a, :c] = flat[start:start + c]
        start += c
    return out


def compare(name: str, net: Any, q: bool, batches: Sequence[VecObs], policy: OnnxPolicy, rng: np.random.Generator,
            export_seconds: float, file_bytes: int) -> Parity:
    diff, n_obs, n_actors = 0.0, 0, 0
    arg_eq = arg_ties = smp_eq = smp_ties = bad = 0
    n_values, continuous_diff, outside = 0, 0.0, 0
    for vec in batches:
        state = to_state(vec, policy.action_space)
        noise = {a: rng.random(vec.action_masks[a].actors.items(), dtype=np.float32) for a, space in
                 policy.action_space.items() if not isinstance(space, CONTINUOUS_SPACES)}
        out = policy.outputs(vec, noise)
        ours = _torch_values(net, q, state)
        n_obs += len(vec)
        theirs_continuous = _torch_continuous(net, state)
        if theirs_continuous:
            sampled = policy.act_batch(vec, deterministic=False, rng=rng)
            counts = _compare_continuous(name, policy, vec, state, out, theirs_continuous, sampled)
            n_values, continuous_diff, outside = (n_values + counts[0], max(continuous_diff, counts[1]),
                                                  outside + counts[2])
        for a, space in policy.action_space.items():
            if isinstance(space, CONTINUOUS_SPACES):
                continue
            theirs = ours[a].numpy()  # [n_actors, width] torch layout
            table = out[f"{'q' if q else 'probs'}/{a}"]
            if isinstance(space, SelectEntityActionSpace):
                counts = out[f"counts/{a}"]
                assert np.array_equal(counts, np.repeat(vec.action_masks[a].actees.size1(),
                                                        vec.action_masks[a].actors.size1()))
                width = theirs.shape[1] if theirs.ndim == 2 else 0
                valid = np.arange(width)[None, :] < counts[:, None]
                flat = theirs[valid] if len(counts) else np.zeros(0, np.float32)
                padded = np.full((len(counts), width), -np.inf if q else 0.0, np.float32)
                padded[valid] = table
                table, theirs_cmp = padded, theirs
                assert flat.shape == out[f"{'q' if q else 'probs'}/{a}"].shape
            else:
                counts = None
                theirs_cmp = theirs
            n_actors += table.shape[0]
            if not table.shape[0]:
                continue
            finite = np.isfinite(theirs_cmp)
            assert np.array_equal(finite, np.isfinite(table)), f"{name}/{a}: -inf entries differ"
            scale = np.maximum(1.0, np.abs(theirs_cmp[finite])) if q else 1.0
            diff = max(diff, float(np.max(np.abs(table[finite] - theirs_cmp[finite]) / scale, initial=0.0)))
            # argmax: ties where the two best differ by <= the tolerance
            best = np.where(finite, theirs_cmp, -np.inf)
            top2 = -np.sort(-best, axis=1)[:, :2]
            tie = (top2.shape[1] > 1) & (top2[:, 0] - top2[:, min(1, top2.shape[1] - 1)] <= TOLERANCE * (
                np.maximum(1.0, np.abs(top2[:, 0])) if q else 1.0))
            same = best.argmax(axis=1) == out[f"argmax/{a}"]
            arg_eq += int((same & ~tie).sum())
            arg_ties += int(tie.sum())
            bad += int((~same & ~tie).sum())
            if q:
                continue
            allowed = _allowed(space, state["action_masks"][a], theirs.shape[1], counts) if counts is not None \
                else state["action_masks"][a]["mask"].as_array()
            ref = inverse_cdf_sample(torch.from_numpy(theirs_cmp), torch.from_numpy(np.array(allowed)),
                                     torch.from_numpy(noise[a])).numpy()
            cdf = np.cumsum(theirs_cmp, axis=1)
            near = (np.abs(cdf - (noise[a] * cdf[:, -1])[:, None]) <= TOLERANCE).any(axis=1)
            same = ref == out[f"sample/{a}"]
            smp_eq += int((same & ~near).sum())
            smp_ties += int(near.sum())
            bad += int((~same & ~near).sum())
    return Parity(name, n_obs, n_actors, diff, arg_eq, arg_ties, smp_eq, smp_ties, bad, export_seconds, file_bytes,
                  n_values, continuous_diff, outside)


def check(env: str, frame: str = "PPO", overrides: Sequence[str] = (), label: Optional[str] = None,
          n_env_rows: int = 500, n_synthetic: int = 500, seed: int = 0, directory: Optional[str] = None,
          device: str = "cpu") -> Parity:
    """Exports ``env``'s bundled-config network (random weights; on ``device``) and compares it on
    ``n_env_rows`` + ``n_synthetic`` observations. An environment without a bundled config (a
    registry name, or ``package.module:Class``) takes the run layer's defaults and ``overrides``."""
    path = bundled_config_path(env, frame) if ":" not in env else None
    if path is None:
        config = config_from_dict(apply_overrides({"env": {"name": env}, "frame": {"name": frame}}, list(overrides)),
                                  f"{env} (defaults)")
    else:
        config = load_config(path, list(overrides))
    factory = EnvFactory(config.env)
    obs_space, action_space = factory.spaces()
    frame_obj, _ = make_frame(config, obs_space, action_space)
    net, kind = _acting_model(frame_obj)
    q = kind.endswith("q")
    _randomise(net, seed)
    net.to(device)
    batches = env_batches(factory, n_env_rows, seed)
    most = {t: max(int(b.features[t].size1().max(initial=0)) for b in batches) for t in obs_space.entities}
    with torch.no_grad(), net.collecting_stats():
        for vec in batches:
            state = to_state(vec, action_space)
            if q:
                net.q_values(state["entities"], state["action_masks"], state.get("visible"))
            else:
                net(state["entities"], state["action_masks"], state.get("visible"))
    net.eval()
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = os.path.join(tmp, "policy.onnx")
        result = export_policy(frame_obj, path)
        policy = OnnxPolicy(path)
        rng = np.random.default_rng(seed + 1)
        synthetic = [synthetic_batch(obs_space, action_space, 50, most, rng) for _ in range(n_synthetic // 50)]
        return compare(label or f"{env} ({kind})", net, q, list(batches) + synthetic, policy, rng,
                       result.seconds, result.size)


#: The full matrix: every example environment with its bundled model, a pooling model, a DQN run
#: and the games of several players (name, frame, overrides, label).
MATRIX = [
    ("MineSweeper", "PPO", (), "MineSweeper (relpos; select-entity)"),
    ("MineSweeper", "DQN", (), "MineSweeper DQN (dueling Q-heads)"),
    ("MineSweeper", "PPO", ("model.relpos_encoding=null", "model.pooling=meanmax"), "MineSweeper (meanmax pooling)"),
    ("MineSweeper", "PPO", ("model.relpos_encoding={extent: [3, 2], position_features: [x, y], scale: 2.0, "
                            "per_entity_values: true}", "model.n_head=4"),
     "MineSweeper (relpos: value table per entity type, scale 2, 4 heads)"),
    ("MineSweeper", "PPO", ("model.relpos_encoding=null", "model.pooling=max"), "MineSweeper (max pooling)"),
    ("CherryPick", "PPO", (), None),
    ("Count", "PPO", (), "Count (visibility)"),
    ("FloorIsLava", "PPO", (), "FloorIsLava (relpos)"),
    ("Minefield", "PPO", ("model.translation={reference_entity: Vehicle, position_features: [x_pos, y_pos], "
                          "rotation_angle_feature: direction, add_dist_feature: true}",),
     "Minefield (translation, rotation by an angle, distance)"),
    ("Minefield", "PPO", ("model.translation={reference_entity: Vehicle, position_features: [x_pos, y_pos], "
                          "rotation_vec_features: [direction, step]}", "model.n_layer=0"),
     "Minefield (translation, rotation by a vector, no layers)"),
    ("MoveToOrigin", "PPO", (), None),
    ("MultiArmedBandit", "PPO", (), "MultiArmedBandit (global action)"),
    ("MultiSnake", "PPO", (), None),
    ("NotHotdog", "PPO", (), None),
    ("PickMatchingBalls", "PPO", (), None),
    ("RockPaperScissors", "PPO", (), None),
    ("Xor", "PPO", (), None),
    ("ConnectFour", "PPO", (), "ConnectFour (two players, relpos)"),
    ("Skirmish", "PPO", (), "Skirmish (two players, relpos)"),
    ("RockPaperScissorsDuel", "PPO", (), "RockPaperScissorsDuel (two players)"),
    ("test.model.test_continuous:Fleet", "PPO", ("model.continuous=beta",),
     "Fleet (continuous within narrowed bounds, global continuous, categorical; Beta)"),
    ("test.model.test_continuous:Fleet", "PPO", ("model.continuous=squashed_gaussian",),
     "Fleet (continuous within narrowed bounds, global continuous, categorical; squashed Gaussian)"),
    ("test.run.parity:Swing", "PPO", ("model.continuous=squashed_gaussian",),
     "Swing (global features and a global continuous action only; squashed Gaussian)"),
    ("test.run.parity:Swing", "PPO", ("model.kind=mlp", "model.continuous=beta", "model.critic=separate"),
     "Swing (model.kind: mlp, as the bundled Pendulum-v1 config; Beta)"),
    ("test.run.parity:Swing", "PPO", ("model.kind=mlp", "model.continuous=squashed_gaussian", "model.activation=relu"),
     "Swing (model.kind: mlp; squashed Gaussian, ReLU)"),
    ("MultiArmedBandit", "PPO", ("model.kind=mlp", "model.activation=gelu"),
     "MultiArmedBandit (model.kind: mlp; global categorical, GELU)"),
    ("Vehicles", "PPO", ("model.continuous=beta",), "Vehicles (continuous, fixed when off the road; Beta)"),
    ("Turrets", "PPO", ("model.continuous=squashed_gaussian",),
     "Turrets (continuous and categorical; squashed Gaussian)"),
]


if __name__ == "__main__":
    print(HEADER)
    for env, frame, overrides, label in MATRIX:
        print(check(env, frame, overrides, label).row(), flush=True)
    sys.exit(0)
