"""RogueNet: a ragged-batch transformer policy and value function over entities, in pure PyTorch."""
from __future__ import annotations

from typing import Any, Dict, Literal, Mapping, NamedTuple, Optional, Tuple

import torch
from torch import nn

from entmachin.env.action import (
    CONTINUOUS_SPACES,
    GLOBAL_SPACES,
    ActionSpace,
    CategoricalActionSpace,
    ContinuousActionSpace,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionSpace,
    SelectEntityActionSpace,
)
from entmachin.env.common import GLOBAL_ENTITY
from entmachin.env.environment import ObsSpace
from entmachin.model.attention import RaggedTransformer, segment_pool
from entmachin.model.compiled import check_compiler, set_compiled
from entmachin.model.config import RogueNetConfig
from entmachin.model.continuous import ContinuousHead, refuse_continuous
from entmachin.model.embedding import EntityEmbedding, TokenBatch
from entmachin.model.heads import CategoricalHead, CategoricalQHead, HeadOutput, SelectEntityHead, SelectEntityQHead
from entmachin.model.input_norm import NormalisedModule
from entmachin.model.inputs import (
    DeferredChecks,
    ParsedMask,
    parse_action_masks,
    parse_actions,
    parse_entities,
)
from entmachin.model.memory import EntityMemoryCore, MemoryCore, NextStates, RecurrentInputs, run_memory
from entmachin.model.relpos import RelativePositionEncoding
from entmachin.model.tables import ChoiceTables
from entmachin.model.trust import CriticView, TrustedInputs
from entmachin.model.validation import check_actions, check_masks
from entmachin.ragged.tensor import RaggedTensor

class RogueNetOutput(NamedTuple):
    """What ``RogueNet.forward`` returns.

    Attributes:
        action: action name -> int64 ragged ``[n_actors, 1]``: the chosen (or given) choice of
            each actor; for select-entity actions, the position in the row's actee list; for
            continuous actions, float32 ragged ``[n_actors, n_values]``, each within its bounds.
        log_prob: action name -> float32 ragged ``[n_actors, 1]``.
        entropy: action name -> float32 ragged ``[n_actors, 1]``.
        log_prob_sum: ``[B, 1]`` sum of every actor's log-probability in each row.
        entropy_sum: ``[B, 1]`` sum of every actor's entropy in each row.
        memory: with ``model.memory``, each sequence's state after its last step, float
            ``[S, memory_size]`` (acting: ``[B, memory_size]``, the state the row's next step takes);
            None without memory.
        entity_memory: with ``model.memory.per_entity``, entity type -> float ``[n_entities,
            entity_memory_size]``, each entity's state after this step, in the entities' order; else None.
    """

    action: Dict[str, RaggedTensor]
    log_prob: Dict[str, RaggedTensor]
    entropy: Dict[str, RaggedTensor]
    log_prob_sum: torch.Tensor
    entropy_sum: torch.Tensor
    memory: Optional[torch.Tensor] = None
    entity_memory: Optional[Dict[str, torch.Tensor]] = None


class RogueNet(ChoiceTables, TrustedInputs, NormalisedModule):
    """Policy and value network over ragged batches of entities.

    Every entity is embedded by its type (running input normalisation -> Linear -> ReLU ->
    LayerNorm; a learned vector for types without features; global features appended to every
    entity), attends to the entities of its own row (visible entities never to invisible ones),
    and the action heads read the actors' embeddings. A ``__global__`` token follows each row's
    entities when the action space has a global categorical action.

    Args:
        obs_space: the environment's observation space.
        action_space: action name -> action space (may be empty for a value-only network).
        config: hyperparameters.
        q_head: also build one Q-head per action for :meth:`q_values` (``"plain"`` or
            ``"dueling"``; None: none, the parameters of a policy network only).

    Shape:
        entities[t]: ragged float ``[n_entities, n_features]``, one sequence per row (``B`` rows);
        see ``forward`` and ``value`` for the rest.

    Example:
        >>> net = RogueNet(env.obs_space(), env.action_space())
        >>> state = to_state(vec_obs, env.action_space())
        >>> with net.collecting_stats():
        ...     out = net(state["entities"], state["action_masks"], state.get("visible"))
        >>> again = net(state["entities"], state["action_masks"], state.get("visible"), action=out.action)
        >>> value = net.value(state["entities"])   # [B, 1]

    Trusted inputs:
        Every call validates its inputs against the spaces; the checks that depend on tensor
        values are decided together in one device-to-host sync. A caller that has already
        checked the rows it passes (a frame, which checks rows once when they are stored) can
        skip that second pass with :meth:`trusted_inputs`.
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        config: RogueNetConfig = RogueNetConfig(),
        *,
        q_head: Optional[Literal["plain", "dueling"]] = None,
    ) -> None:
        super().__init__()
        if q_head not in (None, "plain", "dueling"):
            raise ValueError(f"RogueNet: q_head must be None, 'plain' or 'dueling', got {q_head!r}")
        if not isinstance(obs_space, ObsSpace):
            raise TypeError(f"RogueNet: obs_space must be an ObsSpace, got {type(obs_space).__name__}")
        if not isinstance(action_space, Mapping):
            raise TypeError(
                f"RogueNet: action_space must map action name -> ActionSpace, got {type(action_space).__name__}"
            )
        if not isinstance(config, RogueNetConfig):
            raise TypeError(f"RogueNet: config must be a RogueNetConfig, got {type(config).__name__}")
        kinds = (CategoricalActionSpace, GlobalCategoricalActionSpace, SelectEntityActionSpace, ContinuousActionSpace,
                 GlobalContinuousActionSpace)
        for name, space in action_space.items():
            if not isinstance(space, kinds):
                raise TypeError(
                    f"RogueNet: action_space['{name}'] is a {type(space).__name__}; expected one of "
                    f"{[k.__name__ for k in kinds]}"
                )
        if q_head is not None and config.memory is not None:
            raise ValueError("RogueNet: memory (config.memory) is trained over sequences by PPO and A2C; Q-heads "
                             "(DQN) take single transitions: remove the memory or train with PPO or A2C")
        if q_head is not None:
            refuse_continuous(action_space, "RogueNet", "Q-heads give one value per choice and a continuous action "
                              "has no choices to take a max over: train it with PPO or A2C")
        global_token = any(isinstance(s, GLOBAL_SPACES) for s in action_space.values())
        if not obs_space.entities and not global_token:
            raise ValueError(
                "RogueNet: the observation space has no entity types and there is no global action; "
                "there is nothing to attend to (use an MLP for dense observations)"
            )
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.config = config
        self.embedding = EntityEmbedding(obs_space, config.d_model, global_token, config.translation, config.input_clip)
        relpos = None
        if config.relpos_encoding is not None:
            features = {name: list(e.features) for name, e in obs_space.entities.items()}
            if global_token:
                features[GLOBAL_ENTITY] = []
            relpos = RelativePositionEncoding(config.relpos_encoding, features, config.d_model // config.n_head)
        self.trunk = RaggedTransformer(config, relpos)
        self.action_names = list(action_space)
        # A list, not a ModuleDict: action names may contain dots.
        self.heads = nn.ModuleList([self._head(space) for space in action_space.values()])
        self.memory = None if config.memory is None else MemoryCore(config.d_model, config.memory)
        self.entity_memory = EntityMemoryCore(config.d_model, config.memory) \
            if config.memory is not None and config.memory.per_entity else None
        self.value_head = nn.Linear(config.d_model, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)
        self.q_head = q_head
        if q_head is not None:
            duel = q_head == "dueling"
            self.q_heads = nn.ModuleList([
                SelectEntityQHead(config.d_model, config.d_qk, duel) if isinstance(space, SelectEntityActionSpace)
                else CategoricalQHead(config.d_model, len(space.index_to_label), duel)
                for space in action_space.values()
            ])
        self._compiler_checked: Optional[str] = None  # the device type compile_problem was asked about
        set_compiled(self, config.compile)

    def _head(self, space: ActionSpace) -> nn.Module:
        if isinstance(space, SelectEntityActionSpace):
            return SelectEntityHead(self.config.d_model, self.config.d_qk)
        if isinstance(space, CONTINUOUS_SPACES):
            return ContinuousHead(self.config.d_model, len(space), self.config.continuous)
        return CategoricalHead(self.config.d_model, len(space.index_to_label))

    @property
    def memory_size(self) -> int:
        """Floats of recurrent state per row (``model.memory``); 0 without memory."""
        return 0 if self.memory is None else self.memory.state_size

    @property
    def entity_memory_size(self) -> int:
        """Floats of recurrent state per entity (``model.memory.per_entity``); 0 without."""
        return 0 if self.entity_memory is None else self.entity_memory.state_size

    def _device(self) -> torch.device:
        return self.value_head.weight.device

    def _checks(self) -> DeferredChecks:
        """The value checks of one call: disabled inside :meth:`trusted_inputs`."""
        return DeferredChecks(enabled=not self.inputs_trusted())

    def _encode(
        self,
        entities: Mapping[str, Any],
        visible: Optional[Mapping[str, Any]],
        masks: Optional[Dict[str, ParsedMask]] = None,
        given: Optional[Dict[str, torch.Tensor]] = None,
        checks: Optional[DeferredChecks] = None,
        recurrent: RecurrentInputs = RecurrentInputs(),
    ) -> Tuple[TokenBatch, torch.Tensor, NextStates]:
        """Validates the inputs (one device sync for all value checks), embeds and runs the trunk, then the
        memory cores with ``recurrent`` where there are some.

        With ``checks`` disabled (:meth:`trusted_inputs`), only the structural checks run.

        Returns:
            the tokens, the trunk's output ``[n_tokens, d_model]`` (with the memory's additions) and the next states.
        """
        checks = checks if checks is not None else self._checks()
        hint = len(next(iter(masks.values())).actors) if masks else None
        weight = self.value_head.weight
        if self._compiler_checked != weight.device.type:
            check_compiler(self, weight.device)
        parsed = parse_entities(self.obs_space, entities, visible, weight.device, checks, hint, weight.dtype)
        if checks.enabled:
            if masks:
                check_masks(self.action_space, masks, parsed, self.embedding.global_token, checks)
            if given:
                check_actions(self.action_space, masks, given, checks)
            checks.raise_first()
        tokens = self.embedding(parsed)
        positions = None
        if self.trunk.relpos is not None:
            positions = self.trunk.relpos.token_positions(tokens.features, tokens.dest, tokens.token_type)
        x = self.trunk(tokens.x, tokens.layout, tokens.visible, positions)  # [n_tokens, d_model]
        x, states = run_memory(self.memory, self.entity_memory, tokens, x, recurrent, weight.device)
        return tokens, x, states

    def forward(
        self,
        entities: Mapping[str, Any],
        action_masks: Mapping[str, Any],
        visible: Optional[Mapping[str, Any]] = None,
        action: Optional[Mapping[str, Any]] = None,
        memory: Optional[torch.Tensor] = None,
        episode_start: Optional[torch.Tensor] = None,
        *,
        deterministic: bool = False,
        sequence_length: int = 1,
        entity_memory: Optional[Mapping[str, Any]] = None,
        entity_handles: Optional[Mapping[str, Any]] = None,
    ) -> RogueNetOutput:
        """Samples actions for every actor (or re-evaluates given ones).

        Args:
            entities: entity type -> ragged float ``[n_entities, n_features]`` (ragged array or
                ``RaggedTensor``, any device); ``'__global__'`` holds the global features.
            action_masks: action name -> ``{"actors", "mask"}`` (categorical) or
                ``{"actors", "actees", "actee_mask"}`` (select-entity), as in the canonical state.
            visible: entity type -> ragged bool ``[n_entities, 1]``; visible entities do not attend
                to invisible ones.
            action: action name -> ragged int64 ``[n_actors, 1]`` (e.g. a previous output's
                ``action``): score these instead of choosing.
            memory: with ``model.memory``, the rows' recurrent state, float ``[B, memory_size]``.
            episode_start: with ``model.memory``, whether each row's step begins an episode, bool ``[B, 1]``.
            sequence_length: steps per sequence the rows make, time-major (``entmachin.model.memory``); acting passes 1.
            entity_memory: with ``model.memory.per_entity``, each entity type's states (ragged float ``[n_entities,
                entity_memory_size]``), as ``EntityMemoryCore`` reads them.
            entity_handles: over sequences, the entities' numbers in their episodes (ragged int64 ``[n_entities, 1]``).
            deterministic: choose each actor's most likely allowed choice instead of sampling.

        Raises:
            ValueError / TypeError: inputs that do not fit the spaces, NaN or infinite features
                (checked before any running statistics see them), indices out of range, an
                actor without any allowed choice, or a given action its mask forbids (inside
                :meth:`trusted_inputs`, only what the shapes tell).
        """
        recurrent = RecurrentInputs(memory, episode_start, sequence_length, entity_memory, entity_handles)
        tokens, x, masks, given, states = self._encode_for_policy(entities, action_masks, visible, action, recurrent)
        return self._policy(tokens, x, masks, given, deterministic)._replace(**states._asdict())

    def forward_with_value(
        self,
        entities: Mapping[str, Any],
        action_masks: Mapping[str, Any],
        visible: Optional[Mapping[str, Any]] = None,
        action: Optional[Mapping[str, Any]] = None,
        memory: Optional[torch.Tensor] = None,
        episode_start: Optional[torch.Tensor] = None,
        *,
        deterministic: bool = False,
        sequence_length: int = 1,
        entity_memory: Optional[Mapping[str, Any]] = None,
        entity_handles: Optional[Mapping[str, Any]] = None,
    ) -> Tuple[RogueNetOutput, torch.Tensor]:
        """``(forward(...), value(entities))`` with the trunk run once when it can be.

        The value sees every entity and the policy only visible ones, so without ``visible`` one pass of the trunk
        serves both; with ``visible`` this runs the two passes. Frames call it for minibatches that train both the
        policy and the value. ``entities``, ``action_masks``, ``action``, ``deterministic`` and the recurrent
        inputs (``memory``, ``episode_start``, ``sequence_length``, ``entity_memory``, ``entity_handles``) are
        :meth:`forward`'s.

        Returns:
            the :meth:`forward` output and the float ``[B, 1]`` value.
        """
        recurrent = RecurrentInputs(memory, episode_start, sequence_length, entity_memory, entity_handles)
        if visible is not None:
            return self.forward(entities, action_masks, visible, action, memory, episode_start,
                                deterministic=deterministic, sequence_length=sequence_length,
                                entity_memory=entity_memory, entity_handles=entity_handles), \
                self.value(entities, None, memory, episode_start, sequence_length=sequence_length,
                           entity_memory=entity_memory, entity_handles=entity_handles)
        tokens, x, masks, given, states = self._encode_for_policy(entities, action_masks, None, action, recurrent)
        return self._policy(tokens, x, masks, given, deterministic)._replace(**states._asdict()), \
            self._value_head(tokens, x)

    def _encode_for_policy(
        self, entities: Mapping[str, Any], action_masks: Mapping[str, Any], visible: Optional[Mapping[str, Any]],
        action: Optional[Mapping[str, Any]], recurrent: RecurrentInputs = RecurrentInputs(),
    ) -> Tuple[TokenBatch, torch.Tensor, Dict[str, ParsedMask], Optional[Dict[str, torch.Tensor]], NextStates]:
        device = self._device()
        # Value checks registered here are decided together with the entities' ones in _encode.
        checks = self._checks()
        masks = parse_action_masks(self.action_space, action_masks, device, checks)
        given = parse_actions(action, masks, device, checks) if action is not None else None
        tokens, x, state = self._encode(entities, visible, masks, given, checks, recurrent)
        return tokens, x, masks, given, state

    def _policy(self, tokens: TokenBatch, x: torch.Tensor, masks: Dict[str, ParsedMask],
                given: Optional[Dict[str, torch.Tensor]], deterministic: bool) -> RogueNetOutput:
        n_rows = tokens.layout.n_rows
        starts = tokens.layout.starts
        actions, log_probs, entropies = {}, {}, {}
        log_prob_sum = x.new_zeros(n_rows, 1, dtype=torch.float32)  # [B, 1]
        entropy_sum = x.new_zeros(n_rows, 1, dtype=torch.float32)  # [B, 1]
        for name, mask in masks.items():
            head = self.heads[self.action_names.index(name)]
            out = self._run_head(head, x, starts, mask, None if given is None else given[name], deterministic)
            actors = mask.actors
            actions[name] = actors.with_data(out.action)  # [n_actors, 1]
            log_probs[name] = actors.with_data(out.log_prob)  # [n_actors, 1]
            entropies[name] = actors.with_data(out.entropy)  # [n_actors, 1]
            log_prob_sum = log_prob_sum.index_add(0, actors.batch_index, out.log_prob)
            entropy_sum = entropy_sum.index_add(0, actors.batch_index, out.entropy)
        return RogueNetOutput(actions, log_probs, entropies, log_prob_sum, entropy_sum)

    @staticmethod
    def _run_head(head: nn.Module, x: torch.Tensor, starts: torch.Tensor, mask: ParsedMask,
                  action: Optional[torch.Tensor], deterministic: bool) -> HeadOutput:
        """The head's output with ``[n_actors, 1]`` fields."""
        actors = mask.actors
        actor_tokens = starts[actors.batch_index] + actors.data[:, 0]  # [n_actors]
        if isinstance(head, SelectEntityHead):
            actees = mask.actees
            actee_tokens = starts[actees.batch_index] + actees.data[:, 0]  # [n_actees]
            return head(x, actors.with_data(actor_tokens[:, None]), actees.with_data(actee_tokens[:, None]),
                        mask.actee_mask, action, deterministic, keepdim=True)
        if isinstance(head, ContinuousHead):
            return head(x, actor_tokens, mask.low, mask.high, action, deterministic)  # action [n_actors, n_values]
        return head(x, actor_tokens, mask.mask, action, deterministic, keepdim=True)

    def value(self, entities: Mapping[str, Any], visible: Optional[Mapping[str, Any]] = None,
              memory: Optional[torch.Tensor] = None, episode_start: Optional[torch.Tensor] = None, *,
              sequence_length: int = 1, entity_memory: Optional[Mapping[str, Any]] = None,
              entity_handles: Optional[Mapping[str, Any]] = None) -> torch.Tensor:
        """The value of each row: mean of all its token embeddings -> Linear (zero-initialised).

        The value sees every entity: ``visible`` is accepted (so that a whole state can be passed) but does not
        restrict attention here. ``entities`` and the recurrent inputs (``memory``, ``episode_start``,
        ``sequence_length``, ``entity_memory``, ``entity_handles``; with ``model.memory``) are :meth:`forward`'s.

        Returns:
            float ``[B, 1]``.
        """
        tokens, x, _ = self._encode(entities, None, recurrent=RecurrentInputs(
            memory, episode_start, sequence_length, entity_memory, entity_handles))
        return self._value_head(tokens, x)

    def _value_head(self, tokens: TokenBatch, x: torch.Tensor) -> torch.Tensor:
        pooled = segment_pool(x, tokens.layout.batch_index, tokens.layout.n_rows, "mean")  # [B, d_model]
        value = self.value_head(pooled)  # [B, 1]
        return value.to(torch.promote_types(value.dtype, torch.float32))

    def critic(self) -> "RogueNetCritic":
        """A module sharing this network whose ``forward(entities, visible=None)`` is :meth:`value`."""
        return RogueNetCritic(self)


class RogueNetCritic(CriticView):
    """The value path of a ``RogueNet`` as a module of its own (it shares the network's weights); its
    ``forward`` returns ``[B, 1]``."""

    network = RogueNet

    def forward(self, entities: Mapping[str, Any], visible: Optional[Mapping[str, Any]] = None,
                memory: Optional[torch.Tensor] = None, episode_start: Optional[torch.Tensor] = None, *,
                sequence_length: int = 1, entity_memory: Optional[Mapping[str, Any]] = None,
                entity_handles: Optional[Mapping[str, Any]] = None) -> torch.Tensor:
        """:meth:`RogueNet.value` of ``entities``, ``visible``, ``memory``, ``episode_start``, ``sequence_length``,
        ``entity_memory`` and ``entity_handles``: float ``[B, 1]``."""
        return self.net.value(entities, visible, memory, episode_start, sequence_length=sequence_length,
                              entity_memory=entity_memory, entity_handles=entity_handles)
