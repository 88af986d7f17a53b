"""``DenseNet``: RogueNet's surface over an MLP, for environments whose observation is one feature vector.

A dense environment (an adapted gymnasium one, say) has global features only and global actions
only: every row of the canonical state holds one ``__global__`` item of ``n_features`` and at
most one actor per action, the ``__global__`` entity. ``DenseNet`` reads that state exactly as
``RogueNet`` does and returns the same ``RogueNetOutput``, so the frames, the collector and the
runner use it unchanged: an MLP trunk (``_DenseTrunk``: running input normalisation, then hidden
layers), a categorical head per global categorical action (``masked_categorical``), a bounded
head per global continuous action (``entmachin.model.continuous.bounded``) and a value head.

Shape:
    entities['__global__']: ragged float ``[1, n_features]`` per row (``B`` rows); masks and
    actions as in the canonical state (``docs/architecture.md``); value ``[B, 1]``.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import nn

from entmachin.env.action import ActionSpace, GlobalCategoricalActionSpace, GlobalContinuousActionSpace
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.model.config import CONTINUOUS, Continuous, RogueNetConfig
from entmachin.model.continuous import ContinuousHead
from entmachin.model.heads import CategoricalHead, HeadOutput
from entmachin.model.input_norm import NormalisedModule
from entmachin.model.inputs import DeferredChecks
from entmachin.model.mlp import Activation, _DenseTrunk, _layer
from entmachin.model.rogue_net import RogueNetOutput
from entmachin.model.trust import CriticView, TrustedInputs
from entmachin.ragged.tensor import RaggedTensor, to_ragged_tensor

__all__ = ["DenseNet", "DenseNetCritic"]

WHERE = "DenseNet.forward"
#: RogueNet's distribution of continuous actions, DenseNet's default too.
DEFAULT_CONTINUOUS: Continuous = RogueNetConfig().continuous


class _Mask(NamedTuple):
    """One action's actors and masks on the network's device.

    Attributes:
        actors: ragged int64 ``[n_actors, 1]``, 0 or 1 per row (the ``__global__`` entity).
        mask: bool ``[n_actors, n_choices]`` or None (categorical: every choice allowed).
        low, high: float32 ``[n_actors, n_values]`` (continuous; the space's where the state gives none).
    """

    actors: RaggedTensor
    mask: Optional[torch.Tensor]
    low: Optional[torch.Tensor]
    high: Optional[torch.Tensor]


class DenseNet(TrustedInputs, NormalisedModule):
    """Policy and value MLP over the global features of a dense environment.

    Args:
        obs_space: global features only (an entity type is refused: use ``RogueNet``).
        action_space: global categorical and global continuous actions (may be empty for a
            value-only network, as a separate critic is).
        d_hidden: widths of the hidden layers (SB3's default ``(64, 64)``).
        activation: ``"tanh"`` (SB3's default), ``"relu"`` or ``"gelu"``.
        normalize_inputs: normalise the features with running statistics (learnt only inside
            ``collecting_stats()``, as RogueNet's).
        clip: normalised features are clipped to ``[-clip, clip]``.
        continuous: distribution of continuous actions, ``"beta"`` or ``"squashed_gaussian"``
            (default: ``RogueNetConfig``'s).

    Raises:
        ValueError: entity types, no global feature, or an unknown distribution.
        TypeError: an action space other than the global categorical and continuous ones.

    Example:
        >>> net = DenseNet(envs.obs_space(), envs.action_space())
        >>> state = to_state(vec_obs, envs.action_space())
        >>> with net.collecting_stats():
        ...     out = net(state["entities"], state["action_masks"])
        >>> again = net(state["entities"], state["action_masks"], action=out.action)  # re-scored
        >>> ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss())

    Trusted inputs:
        As ``RogueNet``: every call checks its inputs, the value checks in one device sync;
        :meth:`trusted_inputs` skips the value checks for rows a frame checked when it stored them.
    """

    def __init__(self, obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], *,
                 d_hidden: Sequence[int] = (64, 64), activation: Activation = "tanh", normalize_inputs: bool = True,
                 clip: float = 5.0, continuous: Continuous = DEFAULT_CONTINUOUS) -> None:
        super().__init__()
        if not isinstance(obs_space, ObsSpace):
            raise TypeError(f"DenseNet: obs_space must be an ObsSpace, got {type(obs_space).__name__}")
        if obs_space.entities:
            raise ValueError(f"DenseNet: the observation space has entity types {list(obs_space.entities)}; DenseNet "
                             "reads global features only (use RogueNet, model.kind: rogue_net, for entities)")
        if not obs_space.global_features:
            raise ValueError("DenseNet: the observation space has no global features; there is nothing to read")
        if continuous not in CONTINUOUS:
            raise ValueError(f"DenseNet: continuous must be one of {list(CONTINUOUS)}, got {continuous!r}")
        kinds = (GlobalCategoricalActionSpace, GlobalContinuousActionSpace)
        for name, space in action_space.items():
            if not isinstance(space, kinds):
                raise TypeError(f"DenseNet: action_space['{name}'] is a {type(space).__name__}; a dense network "
                                f"takes global actions only ({[k.__name__ for k in kinds]}); use RogueNet for actions "
                                "of entities")
        self.obs_space = obs_space  # the frames' store checks read both spaces
        self.action_space = dict(action_space)
        self.continuous = continuous
        self.trunk = _DenseTrunk("DenseNet", len(obs_space.global_features), tuple(d_hidden), activation,
                                 normalize_inputs, clip)
        self.action_names = list(action_space)
        self.heads = nn.ModuleList([  # a list, not a ModuleDict: action names may contain dots
            ContinuousHead(self.trunk.d_out, len(space), continuous) if isinstance(space, GlobalContinuousActionSpace)
            else CategoricalHead(self.trunk.d_out, len(space.index_to_label))
            for space in action_space.values()
        ])
        self.value_head = _layer(self.trunk.d_out, 1, 1.0)


    # ------------------------------------------------------------------ forward passes

    def forward(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                visible: Optional[Mapping[str, Any]] = None, action: Optional[Mapping[str, Any]] = None, *,
                deterministic: bool = False) -> RogueNetOutput:
        """Chooses every global action of each row (or scores the given ones).

        Args:
            entities: ``{"__global__": ragged float [1, n_features] per row}``.
            action_masks: action name -> ``{"actors"}`` plus ``"mask"`` (categorical) or
                ``"low"`` / ``"high"`` (continuous), as in the canonical state.
            visible: accepted for the canonical state's sake; there are no entities to hide.
            action: action name -> ragged int64 ``[n_actors, 1]`` (categorical) or float
                ``[n_actors, n_values]`` (continuous): score these instead of choosing.
            deterministic: the most likely choice, the Beta's mean or the squashed Gaussian's
                mean, instead of sampling.

        Returns:
            ``RogueNetOutput``: per action, ragged ``[n_actors, 1]`` (continuous actions
            ``[n_actors, n_values]``) values, log-probabilities and entropies, and their per-row
            sums ``[B, 1]``.

        Raises:
            ValueError / TypeError: inputs that do not fit the spaces (inside
                :meth:`trusted_inputs`, only what the shapes tell).
        """
        h, masks, given = self._encode(entities, action_masks, action)
        return self._policy(h, masks, given, deterministic)

    def forward_with_value(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                           visible: Optional[Mapping[str, Any]] = None, action: Optional[Mapping[str, Any]] = None,
                           *, deterministic: bool = False) -> Tuple[RogueNetOutput, torch.Tensor]:
        """``(forward(...), value(entities))`` from one pass of the trunk; ``entities``, ``action_masks``, ``visible``,
        ``action`` and ``deterministic`` are :meth:`forward`'s."""
        h, masks, given = self._encode(entities, action_masks, action)
        return self._policy(h, masks, given, deterministic), self._value_of(h)

    def probabilities(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                      visible: Optional[Mapping[str, Any]] = None) -> Dict[str, RaggedTensor]:
        """Every actor's probability of each choice of the categorical actions in ``action_masks``
        (0 where forbidden), as :meth:`forward` samples them; ``RogueNet.probabilities``' layout. ``entities`` and
        ``visible`` are :meth:`forward`'s.

        Returns:
            action name -> float32 ragged ``[n_actors, n_choices]``, one sequence per row.

        Raises:
            ValueError / TypeError: as :meth:`forward`.
        """
        h, masks, _ = self._encode(entities, action_masks, None)
        out = {}
        for name, (actors, mask, _, _) in masks.items():
            head = self.heads[self.action_names.index(name)]
            if isinstance(head, ContinuousHead):
                continue
            logits = head.proj(h.index_select(0, actors.batch_index)).float()  # [n_actors, n_choices]
            if mask is not None:
                logits = logits.masked_fill(~mask, float("-inf"))
            out[name] = actors.with_data(logits.softmax(dim=-1))
        return out

    def value(self, entities: Mapping[str, Any], visible: Optional[Mapping[str, Any]] = None) -> torch.Tensor:
        """The value of each row, float ``[B, 1]``; ``entities`` and ``visible`` are :meth:`forward`'s."""
        checks = DeferredChecks(enabled=not self.inputs_trusted())
        features = self._features(entities, checks)  # [B, n_features]
        checks.raise_first()
        return self._value_of(self.trunk.features(features))

    def critic(self) -> "DenseNetCritic":
        """A module sharing this network whose ``forward(entities, visible=None)`` is :meth:`value`."""
        return DenseNetCritic(self)

    def _value_of(self, h: torch.Tensor) -> torch.Tensor:
        value = self.value_head(h)  # [B, 1]
        return value.to(torch.promote_types(value.dtype, torch.float32))

    def _encode(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any], action: Optional[Mapping[str, Any]]
                ) -> Tuple[torch.Tensor, Dict[str, _Mask], Optional[Dict[str, torch.Tensor]]]:
        """The trunk's ``[B, d_hidden[-1]]`` output, the parsed masks and given actions, after one
        sync for every value check."""
        checks = DeferredChecks(enabled=not self.inputs_trusted())
        features = self._features(entities, checks)  # [B, n_features]
        masks = self._masks(action_masks, features.shape[0], checks)
        given = None if action is None else self._given(action, masks, checks)
        checks.raise_first()
        return self.trunk.features(features), masks, given

    def _policy(self, h: torch.Tensor, masks: Dict[str, _Mask], given: Optional[Dict[str, torch.Tensor]],
                deterministic: bool) -> RogueNetOutput:
        actions, log_probs, entropies = {}, {}, {}
        log_prob_sum = h.new_zeros(h.shape[0], 1, dtype=torch.float32)  # [B, 1]
        entropy_sum = h.new_zeros(h.shape[0], 1, dtype=torch.float32)  # [B, 1]
        for name, (actors, mask, low, high) in masks.items():
            head = self.heads[self.action_names.index(name)]
            rows = actors.batch_index  # [n_actors]: each actor is its row's __global__ entity
            chosen = None if given is None else given[name]
            if isinstance(head, ContinuousHead):
                out: HeadOutput = head(h, rows, low, high, chosen, deterministic)  # action [n_actors, n_values]
            else:
                out = head(h, rows, mask, chosen, deterministic, keepdim=True)  # action [n_actors, 1]
            actions[name] = actors.with_data(out.action)
            log_probs[name] = actors.with_data(out.log_prob)  # [n_actors, 1]
            entropies[name] = actors.with_data(out.entropy)  # [n_actors, 1]
            log_prob_sum = log_prob_sum.index_add(0, rows, out.log_prob)
            entropy_sum = entropy_sum.index_add(0, rows, out.entropy)
        return RogueNetOutput(actions, log_probs, entropies, log_prob_sum, entropy_sum)

    # ------------------------------------------------------------------ inputs

    def _features(self, entities: Mapping[str, Any], checks: DeferredChecks) -> torch.Tensor:
        """``entities['__global__']`` as float ``[B, n_features]`` on the network's device."""
        if not isinstance(entities, Mapping):
            raise TypeError(f"{WHERE}: entities must map '{GLOBAL_ENTITY}' -> ragged features, got "
                            f"{type(entities).__name__}")
        if other := [name for name in entities if name != GLOBAL_ENTITY]:
            raise ValueError(f"{WHERE}: entities['{other[0]}'] is an entity type; DenseNet reads only the global "
                             f"features, entities['{GLOBAL_ENTITY}'] (use RogueNet for entities)")
        if GLOBAL_ENTITY not in entities:
            raise ValueError(f"{WHERE}: entities has no '{GLOBAL_ENTITY}' entry; to_state(vec_obs) puts the global "
                             "features there")
        weight = self.value_head.weight
        where = f"{WHERE}: entities['{GLOBAL_ENTITY}']"
        rt = to_ragged_tensor(entities[GLOBAL_ENTITY], weight.device, where)
        declared = self.obs_space.global_features
        if rt.data.dim() != 2 or rt.data.shape[1] != len(declared):
            raise ValueError(f"{where} has items of shape {rt.trailing_shape}; ObsSpace.global_features declares "
                             f"{len(declared)} ({declared})")
        if not rt.data.is_floating_point():
            raise TypeError(f"{where} holds {rt.dtype}; expected floating-point features")
        if rt.n_items != len(rt):
            raise ValueError(f"{where} holds {rt.n_items} items in {len(rt)} rows; the global features take exactly "
                             "one per row")
        if checks.enabled:
            checks.add((rt.lengths != 1).any(), lambda: f"{where} must hold exactly one item per row, got row lengths "
                       f"{rt.lengths.tolist()}")
            finite = torch.isfinite(rt.data)  # [B, n_features]
            checks.add(~finite.all(), lambda: (
                f"{where} row {int(torch.nonzero(~finite)[0, 0])} has a non-finite value in feature "
                f"'{declared[int(torch.nonzero(~finite)[0, 1])]}'; features must be finite"))
        return rt.data if rt.dtype == weight.dtype else rt.data.to(weight.dtype)  # [B, n_features]

    def _masks(self, action_masks: Mapping[str, Any], n_rows: int, checks: DeferredChecks) -> Dict[str, _Mask]:
        if not isinstance(action_masks, Mapping):
            raise TypeError(f"{WHERE}: action_masks must map action name -> masks, got {type(action_masks).__name__}")
        parsed: Dict[str, _Mask] = {}
        for name, entry in action_masks.items():
            where = f"{WHERE}: action_masks['{name}']"
            if name not in self.action_space:
                raise ValueError(f"{where}: unknown action; the action space has {list(self.action_space)}")
            space = self.action_space[name]
            continuous = isinstance(space, GlobalContinuousActionSpace)
            allowed = {"actors", "low", "high"} if continuous else {"actors", "mask"}
            if not isinstance(entry, Mapping) or "actors" not in entry:
                raise ValueError(f"{where}: expected a mapping with an 'actors' entry, got {entry!r:.80}")
            if unknown := sorted(set(entry) - allowed):
                raise ValueError(f"{where}: unknown key '{unknown[0]}' for a {type(space).__name__}; allowed: "
                                 f"{sorted(allowed)}")
            actors = self._ragged(entry["actors"], 1, n_rows, f"{where}['actors']", "the canonical state")
            if actors.dtype != torch.int64:
                raise TypeError(f"{where}['actors'] holds {actors.dtype}; expected int64 entity indices")
            if checks.enabled:
                # The __global__ entity comes after a row's entities, and a dense row has none: index 0.
                checks.add((actors.lengths > 1).any() | (actors.data != 0).any(), lambda w=where, a=actors: (
                    f"{w}['actors'] must hold at most one actor per row, the {GLOBAL_ENTITY} entity (index 0 in a row "
                    f"without entities); got row lengths {a.lengths.tolist()} and indices {a.data[:, 0].tolist()}"))
            if continuous:
                low, high = (self._bounds(entry.get(side), side, space, actors, where, checks)
                             for side in ("low", "high"))  # [n_actors, n_values] each
                if checks.enabled:
                    space_low, space_high = (torch.as_tensor(b, device=low.device) for b in (space.low, space.high))
                    bad = ~torch.isfinite(low) | ~torch.isfinite(high) | (low > high) | (low < space_low) \
                        | (high > space_high)  # [n_actors, n_values]
                    checks.add(bad.any(), lambda w=where, b=bad, s=space: (
                        f"{w}: the bounds of actor {int(torch.nonzero(b)[0, 0])} in value "
                        f"'{s.names[int(torch.nonzero(b)[0, 1])]}' are not finite, crossed or outside the space's "
                        f"[{s.low.tolist()}, {s.high.tolist()}]"))
                parsed[name] = _Mask(actors, None, low, high)
                continue
            mask = None
            if entry.get("mask") is not None:
                n_choices = len(space.index_to_label)
                rt = self._ragged(entry["mask"], n_choices, n_rows, f"{where}['mask']", f"the action space "
                                  f"({n_choices} choices)")
                self._same_rows(rt, actors, f"{where}['mask']", checks)
                mask = rt.data.to(torch.bool)  # [n_actors, n_choices]
                if checks.enabled:
                    checks.add(~mask.any(dim=1).all(), lambda w=where, m=mask: (
                        f"{w}['mask'] leaves actor {int(torch.nonzero(~m.any(dim=1))[0, 0])} without an allowed "
                        "choice; every actor needs one"))
            parsed[name] = _Mask(actors, mask, None, None)
        return parsed

    def _bounds(self, value: Any, side: str, space: GlobalContinuousActionSpace, actors: RaggedTensor, where: str,
                checks: DeferredChecks) -> torch.Tensor:
        """A continuous action's ``low`` or ``high``, float32 ``[n_actors, n_values]`` (the space's where absent)."""
        if value is None:
            bound = torch.as_tensor(getattr(space, side), device=actors.data.device)  # [n_values]
            return bound.expand(actors.n_items, len(space))
        rt = self._ragged(value, len(space), len(actors), f"{where}['{side}']", f"the action space ({len(space)} "
                          "values)")
        self._same_rows(rt, actors, f"{where}['{side}']", checks)
        return rt.data.float()

    def _given(self, action: Mapping[str, Any], masks: Dict[str, _Mask], checks: DeferredChecks
               ) -> Dict[str, torch.Tensor]:
        """Given actions: int64 ``[n_actors]`` choices or float32 ``[n_actors, n_values]`` values."""
        if not isinstance(action, Mapping):
            raise TypeError(f"{WHERE}: action must map action name -> ragged values, got {type(action).__name__}")
        if extra := [name for name in action if name not in masks]:
            raise ValueError(f"{WHERE}: action['{extra[0]}'] has no entry in action_masks ({list(masks)})")
        given: Dict[str, torch.Tensor] = {}
        for name, (actors, mask, low, _) in masks.items():
            where = f"{WHERE}: action['{name}']"
            if name not in action:
                raise ValueError(f"{where} is missing; give a value for every actor of every action in action_masks")
            space = self.action_space[name]
            if isinstance(space, GlobalContinuousActionSpace):
                rt = self._ragged(action[name], len(space), len(actors), where,
                                  f"the action space ({len(space)} values)")
                if not rt.data.is_floating_point():
                    raise TypeError(f"{where} holds {rt.dtype}; a continuous action's values are floats")
                self._same_rows(rt, actors, where, checks)
                values = rt.data.float()  # [n_actors, n_values]
                if checks.enabled:
                    bad = ~torch.isfinite(values)  # [n_actors, n_values]
                    checks.add(bad.any(), lambda w=where, b=bad, v=values, s=space: (
                        f"{w} actor {int(torch.nonzero(b)[0, 0])} has {float(v[b][0])} in value "
                        f"'{s.names[int(torch.nonzero(b)[0, 1])]}'; values must be finite"))
                given[name] = values
                continue
            rt = self._ragged(action[name], 1, len(actors), where, "a categorical action (one choice per actor)")
            if rt.dtype != torch.int64:
                raise TypeError(f"{where} holds {rt.dtype}; expected int64 choices")
            self._same_rows(rt, actors, where, checks)
            choice = rt.data[:, 0]  # [n_actors]
            n_choices = len(space.index_to_label)
            checks.add_range(choice, torch.full_like(choice, n_choices), lambda w=where, n=n_choices: (
                f"{w} holds a choice outside [0, {n})"))
            if mask is not None and checks.enabled:
                forbidden = ~mask.gather(1, choice.clamp(0, n_choices - 1)[:, None])[:, 0]  # [n_actors]
                checks.add(forbidden.any(), lambda w=where, f=forbidden: (
                    f"{w}: actor {int(torch.nonzero(f)[0, 0])}'s choice is one its mask forbids"))
            given[name] = choice
        return given

    def _ragged(self, value: Any, width: int, n_rows: int, where: str, declared: str) -> RaggedTensor:
        """``value`` as a ragged tensor on the network's device, of ``width`` values per item and
        ``n_rows`` rows (structural checks)."""
        rt = to_ragged_tensor(value, self.value_head.weight.device, where)
        if rt.data.dim() != 2 or rt.data.shape[1] != width:
            raise ValueError(f"{where} has items of shape {rt.trailing_shape}; {declared} takes {width} per item")
        if len(rt) != n_rows:
            raise ValueError(f"{where} has {len(rt)} rows, but entities['{GLOBAL_ENTITY}'] has {n_rows}; every value "
                             "needs one row per environment step")
        return rt

    @staticmethod
    def _same_rows(rt: RaggedTensor, actors: RaggedTensor, where: str, checks: DeferredChecks) -> None:
        """One item of ``rt`` per actor of each row."""
        def message() -> str:
            return (f"{where} has row lengths {rt.lengths.tolist()}, but the actors {actors.lengths.tolist()}; one "
                    "per actor")

        if rt.n_items != actors.n_items:
            raise ValueError(message())
        if checks.enabled:
            checks.add((rt.lengths != actors.lengths).any(), message)


class DenseNetCritic(CriticView):
    """The value path of a ``DenseNet`` as a module of its own (it shares the network's weights).

    Shape:
        returns ``[B, 1]``.
    """

    network = DenseNet
