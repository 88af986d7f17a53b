"""The per-actor tables of RogueNet's heads: every choice's probability, log-probability or Q-value.

:class:`ChoiceTables` is a mixin of ``RogueNet``: from one pass of the trunk (``_encode_for_policy``), each
head gives a row of numbers per actor instead of one sampled choice; behaviour cloning, recording, DQN and
play read them.
"""
from __future__ import annotations

from typing import Any, Dict, Literal, Mapping, Optional, Tuple

import torch
from torch import nn

from entmachin.model.continuous import ContinuousActionsUnsupported, ContinuousHead
from entmachin.model.embedding import TokenBatch
from entmachin.model.heads import SelectEntityHead, SelectEntityQHead
from entmachin.model.inputs import ParsedMask
from entmachin.model.memory import NextStates, RecurrentInputs
from entmachin.ragged.tensor import RaggedTensor, to_ragged_tensor

__all__ = ["ChoiceTables"]


class ChoiceTables:
    """``q_values``, ``probabilities``, ``probabilities_and_values`` (``probabilities_values_and_memory``: with
    the next states of a network with memory) and ``log_probabilities`` of a network
    with ``heads``, ``q_heads``, ``action_names``, ``_encode_for_policy``, ``value`` and ``_value_head``
    (``RogueNet``)."""

    def q_values(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                 visible: Optional[Mapping[str, Any]] = None) -> Dict[str, RaggedTensor]:
        """One action value per choice per actor, from the Q-heads (``q_head`` must be set).

        Categorical and global actions give ``n_choices`` values per actor, select-entity
        actions one per actee of the actor's row (padded to the batch's longest actee list).
        Choices the masks forbid, and padding, are ``-inf``: they never win a max.

        Returns:
            action name -> float32 ragged ``[n_actors, width]``, one sequence per row.

        Raises:
            RuntimeError: the network was built without ``q_head``.
            ValueError / TypeError: as :meth:`forward`.
        """
        if self.q_head is None:
            raise RuntimeError("RogueNet.q_values: this network has no Q-heads; build it with "
                               "RogueNet(obs_space, action_space, config, q_head='plain' or 'dueling')")

        def q(head: nn.Module, x: torch.Tensor, actors: Any, actees: Any, mask: ParsedMask) -> torch.Tensor:
            if isinstance(head, SelectEntityQHead):
                return head(x, actors, actees, mask.actee_mask)  # [n_actors, width]
            return head(x, actors, mask.mask)  # [n_actors, n_choices]

        return self._per_actor(self.q_heads, q, entities, action_masks, visible)[0]

    def probabilities(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                      visible: Optional[Mapping[str, Any]] = None) -> Dict[str, RaggedTensor]:
        """Every actor's probability of each choice under its mask (0 where forbidden), as
        :meth:`forward` samples them; laid out as :meth:`q_values` (select-entity: one per actee
        of the actor's row, padded with 0 to the batch's longest actee list).

        Returns:
            action name -> float32 ragged ``[n_actors, width]``, one sequence per row.

        Raises:
            ValueError / TypeError: as :meth:`forward`.
        """
        tables, _ = self.log_probabilities(entities, action_masks, visible)
        return {name: table.with_data(table.data.exp()) for name, table in tables.items()}

    def probabilities_and_values(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                                 visible: Optional[Mapping[str, Any]] = None, *, deterministic: bool = False,
                                 ) -> Tuple[Dict[str, RaggedTensor], Dict[str, RaggedTensor]]:
        """From one pass of the trunk: every discrete action's table as :meth:`probabilities`
        gives it, and every continuous action's values drawn as :meth:`forward` draws them
        (``deterministic``: each head's deterministic point), in the same order, so from the same
        random state they are the values ``forward`` would draw. What recording a space of both
        kinds needs.

        Returns:
            ``(tables, values)``: discrete action name -> float32 ragged ``[n_actors, width]``;
            continuous action name -> float32 ragged ``[n_actors, n_values]``.

        Raises:
            ValueError / TypeError: as :meth:`forward`.
        """
        tables, values, _ = self.probabilities_values_and_memory(entities, action_masks, visible,
                                                                 deterministic=deterministic)
        return tables, values

    def probabilities_values_and_memory(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                                        visible: Optional[Mapping[str, Any]] = None,
                                        memory: Optional[torch.Tensor] = None,
                                        episode_start: Optional[torch.Tensor] = None, *, deterministic: bool = False,
                                        entity_memory: Optional[Mapping[str, Any]] = None,
                                        ) -> Tuple[Dict[str, RaggedTensor], Dict[str, RaggedTensor], NextStates]:
        """:meth:`probabilities_and_values` of one step of each row of a network with memory (``memory``,
        float ``[B, memory_size]``, ``episode_start``, bool ``[B, 1]``, and with ``model.memory.per_entity``
        ``entity_memory``, as :meth:`forward` takes them), and the states the step leaves: what recording with
        such a policy carries.

        Returns:
            ``(tables, values, states)``: as :meth:`probabilities_and_values`, and the ``NextStates``: the rows'
            (float ``[B, memory_size]``; None without memory) and each entity type's (type -> float
            ``[n_entities, entity_memory_size]``; None without per-entity memory).
        """
        def probs(head: nn.Module, x: torch.Tensor, actors: Any, actees: Any, mask: ParsedMask) -> torch.Tensor:
            return _choice_log_probs(head, x, actors, actees, mask).exp()

        out, _, _, state = self._per_actor(self.heads, probs, entities, action_masks, visible,
                                           draw="deterministic" if deterministic else "sample",
                                           recurrent=RecurrentInputs(memory, episode_start, 1, entity_memory))
        continuous = {name for name in out if isinstance(self.heads[self.action_names.index(name)], ContinuousHead)}
        return ({name: t for name, t in out.items() if name not in continuous},
                {name: t for name, t in out.items() if name in continuous}, state)

    def log_probabilities(self, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                          visible: Optional[Mapping[str, Any]] = None, *, value: bool = False,
                          continuous: Optional[Mapping[str, Any]] = None, memory: Optional[torch.Tensor] = None,
                          episode_start: Optional[torch.Tensor] = None, sequence_length: int = 1,
                          entity_memory: Optional[Mapping[str, Any]] = None,
                          entity_handles: Optional[Mapping[str, Any]] = None,
                          ) -> Tuple[Dict[str, RaggedTensor], Optional[torch.Tensor]]:
        """Every actor's log-probability of each choice (``-inf`` where forbidden or padding),
        differentiable, as :meth:`probabilities` lays them out; with ``value``, the rows' values
        too, from the same pass of the trunk where ``visible`` allows it (behaviour cloning trains
        on whole tables). A continuous action has no table: its entry is the log-probability
        ``[n_actors, 1]`` of the values ``continuous[name]`` gives.

        Args:
            continuous: continuous action name -> float ragged ``[n_actors, n_values]``, values
                to score (required for every continuous action of ``action_masks``).
            memory / episode_start / sequence_length: with ``model.memory``, the rows' recurrent
                inputs as :meth:`forward` takes them (``S`` sequences of ``L`` steps, time-major).
            entity_memory / entity_handles: with ``model.memory.per_entity``, the entities' states and
                numbers as :meth:`forward` takes them.

        Returns:
            ``(tables, value)``: action name -> float32 ragged ``[n_actors, width]`` (continuous:
            ``[n_actors, 1]``), and float ``[B, 1]`` (None without ``value``).
        """
        recurrent = RecurrentInputs(memory, episode_start, sequence_length, entity_memory, entity_handles)
        tables, tokens, x, _ = self._per_actor(self.heads, _choice_log_probs, entities, action_masks,
                                               visible if not value else None, continuous, recurrent=recurrent)
        if not value:
            return tables, None
        if visible is not None:  # the value sees every entity, the policy only visible ones
            return tables, self.value(entities, None, memory, episode_start, sequence_length=sequence_length,
                                      entity_memory=entity_memory, entity_handles=entity_handles)
        return tables, self._value_head(tokens, x)

    def _per_actor(self, heads: nn.ModuleList, fn: Any, entities: Mapping[str, Any], action_masks: Mapping[str, Any],
                   visible: Optional[Mapping[str, Any]], continuous: Optional[Mapping[str, Any]] = None,
                   draw: Optional[Literal["sample", "deterministic"]] = None,
                   recurrent: RecurrentInputs = RecurrentInputs(),
                   ) -> Tuple[Dict[str, RaggedTensor], TokenBatch, torch.Tensor, NextStates]:
        """``fn(head, x, actors, actees, mask)`` per action, on the actors' (and actees') stream
        indices: int64 ``[n_actors]`` for categorical heads, ragged ``[n, 1]`` for select-entity ones;
        a continuous action's ``[n_actors, 1]`` log-probability of ``continuous[name]``, or with
        ``draw`` its values ``[n_actors, n_values]`` drawn as :meth:`forward` draws them; also the
        tokens, the trunk's output they came from and the ``NextStates`` the step leaves (``recurrent``:
        :meth:`forward`'s ``memory``, ``episode_start``, ``sequence_length`` and ``entity_memory``)."""
        tokens, x, masks, _, state = self._encode_for_policy(entities, action_masks, visible, None, recurrent)
        starts = tokens.layout.starts
        out: Dict[str, RaggedTensor] = {}
        for name, mask in masks.items():
            head = heads[self.action_names.index(name)]
            actors = mask.actors
            actor_tokens = starts[actors.batch_index] + actors.data[:, 0]  # [n_actors]
            if isinstance(head, ContinuousHead):
                if draw is not None:
                    drawn = head(x, actor_tokens, mask.low, mask.high, None, draw == "deterministic").action
                    out[name] = actors.with_data(drawn)  # [n_actors, n_values]
                    continue
                if continuous is None or name not in continuous:
                    raise ContinuousActionsUnsupported(
                        f"RogueNet: action {name!r} is continuous; a table of each choice's probability exists only "
                        "for discrete actions (log_probabilities scores given values: pass continuous={name: values})")
                given = to_ragged_tensor(continuous[name], x.device, f"continuous[{name!r}]")
                if given.data.dim() != 2 or given.data.shape[0] != actors.n_items or given.data.shape[1] != head.n_values:
                    raise ValueError(f"RogueNet.log_probabilities: continuous[{name!r}] has items of shape "
                                     f"{tuple(given.data.shape)}; expected [{actors.n_items}, {head.n_values}] (one "
                                     "row of values per actor)")
                out[name] = actors.with_data(head(x, actor_tokens, mask.low, mask.high, given.data.float()).log_prob)
                continue
            if isinstance(head, SelectEntityHead):
                actees = mask.actees
                actee_tokens = starts[actees.batch_index] + actees.data[:, 0]  # [n_actees]
                values = fn(head, x, actors.with_data(actor_tokens[:, None]), actees.with_data(actee_tokens[:, None]),
                            mask)
            else:
                values = fn(head, x, actor_tokens, None, mask)
            out[name] = actors.with_data(values)
        return out, tokens, x, state


def _choice_log_probs(head: nn.Module, x: torch.Tensor, actors: Any, actees: Any, mask: ParsedMask) -> torch.Tensor:
    """A discrete head's log-probability of every choice of each actor (``-inf`` where forbidden or
    padding), as ``masked_categorical`` computes them: ``[n_actors, width]``."""
    if isinstance(head, SelectEntityHead):
        logits, allowed = head.scores(x, actors, actees, mask.actee_mask)  # [n_actors, width] each
    else:
        logits, allowed = head.proj(x.index_select(0, actors)), mask.mask  # [n_actors, n_choices]
    logits = logits.float()
    if allowed is not None:
        logits = logits.masked_fill(~allowed, float("-inf"))
    return logits.log_softmax(-1)
