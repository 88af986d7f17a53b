"""The workloads of ``bench_rogue_net.py``'s rogue-net comparison, and entmachin's side of it.

Every workload is built here once, written with ``_ragged_batches.save_workload`` and read
back by both sides, so that entmachin and rogue-net see the same observations and actions.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import torch
from _device import clock
from _ragged_batches import build_spaces, load_workload, n_items, save_workload

import entmachin.env
from entmachin.env import (
    CategoricalActionSpace,
    EnvList,
    GlobalCategoricalActionSpace,
    ObsSpace,
    random_actions,
    to_state,
)
from entmachin.env.examples import CherryPick, MineSweeper
from entmachin.model import RogueNet, RogueNetConfig
from entmachin.model.input_norm import collecting_stats_of, input_norms
from entmachin.ragged.array import RaggedArrayBool, RaggedArrayF32, RaggedArrayI64
from entmachin.ragged.arrays import concat, take

# The synthetic batches: type A with U[1, max] entities and 4 features, type B with
# 0-8 entities and 3 features, one categorical action taken by every A entity.
SYNTHETIC_SPACES = {
    "entities": {"A": ["a0", "a1", "a2", "a3"], "B": ["b0", "b1", "b2"]},
    "actions": {"act": {"kind": "categorical", "choices": ["c0", "c1", "c2", "c3", "c4"]}},
}
# rogue-net's defaults, set explicitly on both sides.
CONFIG = RogueNetConfig(d_model=32, n_layer=2, n_head=2, d_qk=16)
# entmachin's side reads the workloads into entmachin's ragged arrays (load_workload's order).
RAGGED_CLASSES = (RaggedArrayF32, RaggedArrayI64, RaggedArrayBool)


class Workload(NamedTuple):
    """A workload as the table shows it: ``name`` is its file stem, ``unit`` tokens or rows."""

    name: str
    label: str
    mode: str
    unit: str


def _ids(starts: np.ndarray, lengths: np.ndarray) -> RaggedArrayI64:
    """Per row ``i`` the entity indices ``starts[i] .. starts[i] + lengths[i] - 1``, int64 ``[n, 1]``."""
    flat = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)] + [np.zeros(0, np.int64)])
    return RaggedArrayI64.from_flattened(flat.astype(np.int64).reshape(-1, 1), lengths.astype(np.int64))


def synthetic_batch(n_rows: int, max_entities: int, rng: np.random.Generator, with_action: bool) -> Dict[str, Any]:
    """The issue's synthetic batch of ``n_rows`` rows (see ``SYNTHETIC_SPACES``)."""
    n_a = rng.integers(1, max_entities + 1, n_rows).astype(np.int64)  # [B]
    n_b = rng.integers(0, 9, n_rows).astype(np.int64)  # [B]
    a = rng.standard_normal((int(n_a.sum()), 4)).astype(np.float32)  # [n_a, 4]
    b = rng.standard_normal((int(n_b.sum()), 3)).astype(np.float32)  # [n_b, 3]
    batch: Dict[str, Any] = {
        "entities": {"A": RaggedArrayF32.from_flattened(a, n_a), "B": RaggedArrayF32.from_flattened(b, n_b)},
        "action_masks": {"act": {"actors": _ids(np.zeros(n_rows, np.int64), n_a)}},
    }
    if with_action:
        choice = rng.integers(0, 5, (int(n_a.sum()), 1)).astype(np.int64)  # [n_a, 1]
        batch["action"] = {"act": RaggedArrayI64.from_flattened(choice, n_a)}
    return batch


def env_spaces(obs_space: ObsSpace, action_space: Dict[str, Any]) -> Dict[str, Any]:
    """The JSON spaces (``_ragged_batches``) of an entmachin environment."""
    actions: Dict[str, Any] = {}
    for name, space in action_space.items():
        if isinstance(space, GlobalCategoricalActionSpace) or obs_space.global_features:
            raise ValueError(f"env_spaces: global features and actions ('{name}') are not part of this benchmark")
        if isinstance(space, CategoricalActionSpace):
            actions[name] = {"kind": "categorical", "choices": list(space.index_to_label)}
        else:
            actions[name] = {"kind": "select"}
    return {"entities": {n: list(e.features) for n, e in obs_space.entities.items()}, "actions": actions}


def rollout(make_env: Callable[[], Any], n_envs: int, n_steps: int, seed: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``n_envs`` x ``n_steps`` rows of random play in an ``EnvList``, as PPO stores them.

    Returns:
        the spaces and one tree ``{"entities", "action_masks", "action"}`` of ``n_steps * n_envs``
        rows, step-major; states are ``to_state(obs, action_space)`` (all masks present).
    """
    envs = EnvList(make_env, n_envs, seed=seed)
    space = envs.action_space()
    rng = np.random.default_rng(seed)
    obs = envs.reset()
    steps = []
    for _ in range(n_steps):
        state = to_state(obs, space)
        action = random_actions(obs, space, rng)
        steps.append({"entities": state["entities"], "action_masks": state["action_masks"], "action": action})
        obs = envs.act(action)
    envs.close()

    def merge(nodes: List[Any]) -> Any:
        if isinstance(nodes[0], dict):
            return {key: merge([n[key] for n in nodes]) for key in nodes[0]}
        return concat(nodes)

    return env_spaces(envs.obs_space(), space), merge(steps)


def take_rows(tree: Dict[str, Any], rows: np.ndarray, with_action: bool = True) -> Dict[str, Any]:
    """The rows ``rows`` of every ragged value of ``tree`` (without ``"action"`` unless asked)."""
    return {key: take_rows(value, rows) if isinstance(value, dict) else take(value, rows)
            for key, value in tree.items() if with_action or key != "action"}


def build_workloads(args: Any, data_dir: str) -> List[Workload]:
    """Writes the workloads of the comparison named by ``args.workloads`` (all if empty) into
    ``data_dir``; returns them in table order. A workload is the same whichever others are asked."""
    rng = np.random.default_rng(args.seed)
    wanted = set(filter(None, args.workloads.split(",")))
    out = []

    def add(name: str, label: str, spaces: Dict[str, Any], mode: str, batches: List[Dict[str, Any]]) -> None:
        if wanted and name not in wanted:
            return
        save_workload(os.path.join(data_dir, name), spaces, mode, batches)
        out.append(Workload(name, label, mode, "tokens" if mode == "train" else "rows"))

    max_e = args.max_entities
    add("synthetic-train", f"A U[1,{max_e}] + B 0-8, {args.rows} rows", SYNTHETIC_SPACES, "train",
        [synthetic_batch(args.rows, max_e, rng, with_action=True)])
    envs = {"minesweeper": ("MineSweeper", lambda: MineSweeper(orbital_cannon=True)),
            "cherrypick": ("CherryPick", lambda: CherryPick(num_cherries=32))}
    rolled = {}
    for name, (title, make_env) in envs.items():
        n_rows = args.n_envs * args.n_steps
        order = rng.permutation(n_rows)
        if wanted and not wanted & {f"{name}-train", f"{name}-infer"}:
            continue
        spaces, tree = rollout(make_env, args.n_envs, args.n_steps, args.seed)
        rolled[name] = (title, spaces, tree)
        n_batches = max(1, n_rows // args.batch_size)
        batches = [take_rows(tree, order[i * args.batch_size:(i + 1) * args.batch_size]) for i in range(n_batches)]
        add(f"{name}-train", f"{title} {n_batches} x {args.batch_size} rows", spaces, "train", batches)
    add("synthetic-infer", f"A U[1,{max_e}] + B 0-8, {args.infer_rows} rows", SYNTHETIC_SPACES, "infer",
        [synthetic_batch(args.infer_rows, max_e, rng, with_action=False)])
    for name, (title, spaces, tree) in rolled.items():
        middle = args.n_steps // 2  # one step of the rollout: what PPO.act sees
        rows = np.arange(middle * args.n_envs, (middle + 1) * args.n_envs)
        add(f"{name}-infer", f"{title} 1 step, {args.n_envs} rows", spaces, "infer",
            [take_rows(tree, rows, with_action=False)])
    return out


class EntmachinWorkload:
    """entmachin's ``RogueNet`` on one workload read back from its files."""

    def __init__(self, stem: str, seed: int, device: torch.device = torch.device("cpu"),
                 compiled: bool = False) -> None:
        spaces, self.mode, self.batches = load_workload(stem, RAGGED_CLASSES)
        obs_space, action_space = build_spaces(spaces, entmachin.env)
        torch.manual_seed(seed)
        config = dataclasses.replace(CONFIG, compile=True) if compiled else CONFIG
        self.net = RogueNet(obs_space, action_space, config).to(device)  # the batches follow it in forward
        self.device = device
        self.warmup_s: List[float] = []  # wall seconds of prepare()'s untimed steps (compiling, if compiled)
        self.norms = input_norms(self.net)  # found once, as PPO.act does
        self.n_rows = sum(len(b["entities"][next(iter(b["entities"]))].size1()) for b in self.batches)
        self.n_entities = sum(n_items(b["entities"]) for b in self.batches)
        self.tokens = 0
        self.net.trunk.register_forward_pre_hook(self._count_tokens)

    def _count_tokens(self, module: Any, inputs: Any) -> None:
        self.tokens += int(inputs[0].shape[0])

    def step(self, mode: str = "") -> Dict[str, int]:
        """One pass over the batches: a PPO minibatch re-evaluation (``train``: given actions
        -> log-probs, backward of their sum) or ``PPO.act`` (``infer``: no_grad, sampling,
        running statistics updated). Returns the actors per action."""
        actors: Dict[str, int] = {}
        for batch in self.batches:
            if (mode or self.mode) == "train":
                self.net.zero_grad(set_to_none=True)
                out = self.net(batch["entities"], batch["action_masks"], action=batch["action"])
                out.log_prob_sum.sum().backward()
            else:
                with torch.no_grad(), collecting_stats_of(self.norms):
                    out = self.net(batch["entities"], batch["action_masks"])
            for name, lp in out.log_prob.items():
                actors[name] = actors.get(name, 0) + int(lp.data.shape[0])
        return actors

    def prepare(self) -> Dict[str, Any]:
        """Untimed: one statistics-collecting pass (as rogue-net's side), then two steps; the
        wall time of each is kept in ``warmup_s`` (a compiled network compiles in them)."""
        now = clock(self.device)
        for mode in ("infer", "", ""):  # statistics, warm-up (allocations, compiling), the counted step
            self.tokens = 0
            start = now()
            actors = self.step(mode)
            self.warmup_s.append(now() - start)
        return {"tokens": self.tokens, "actors": actors}


def compile_summary(warmup_s: List[float], compiled_s: float, eager_s: Optional[float]) -> str:
    """The compile time of a compiled side (its untimed warm-up steps less as many steady steps
    ``compiled_s``) and the training steps after which it is repaid against ``eager_s``."""
    compile_s = sum(warmup_s) - len(warmup_s) * compiled_s
    if eager_s is None:
        repaid = "- (no eager side)"
    elif compiled_s < eager_s:
        repaid = f"{compile_s / (eager_s - compiled_s):,.0f} steps"
    else:
        repaid = "never (not faster)"
    return f"compile {compile_s:.1f} s, break-even after {repaid}"
