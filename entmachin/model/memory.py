"""Memory: a recurrent core after RogueNet's trunk, one state per game row carried from step to step.

Each row's tokens are pooled (mean over the trunk's output), a GRU or LSTM cell steps the row's state
with that summary, and a linear projection of the new state (zero-initialised, so a fresh network acts
as the feed-forward one) is added to every token of the row before the heads and the value read them.

The state of each row is a float ``[B, state_size]`` tensor (an LSTM's ``h`` and ``c`` side by side) given
as ``memory`` with ``episode_start`` (bool ``[B, 1]``: the row's step begins an episode, so the state
given is ignored and starts from zeros). Acting passes one step per row (``sequence_length=1``) and gets
the next state back; training passes ``S`` whole sequences of ``L`` steps laid out time-major (row
``t * S + s`` is step ``t`` of sequence ``s``): the state given at the first step of each sequence starts
the unroll, the states given at later steps are not read, and ``episode_start`` resets the state inside a
sequence where an episode ended (truncated back-propagation through time over each sequence).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.model.attention import segment_pool
from entmachin.model.config import MemoryConfig
from entmachin.ragged.tensor import to_ragged_tensor

__all__ = ["RecurrentCell", "MemoryCore", "EntityMemoryCore", "Recurrence", "RecurrentInputs", "NextStates", "run_memory", "memory_size",
           "entity_memory_size"]


class Recurrence(NamedTuple):
    """One call's recurrent inputs, checked.

    Attributes:
        memory: float ``[S, state_size]``: each sequence's state before its first step.
        episode_start: bool ``[L * S]``: the row's step begins an episode (time-major).
        length: ``L``, the steps of each sequence.
    """

    memory: torch.Tensor
    episode_start: torch.Tensor
    length: int


def memory_size(model: Any) -> int:
    """The width of a model's recurrent state per row (0: the model has no memory)."""
    return int(getattr(model, "memory_size", 0) or 0)


def entity_memory_size(model: Any) -> int:
    """The width of a model's recurrent state per entity (0: no per-entity memory)."""
    return int(getattr(model, "entity_memory_size", 0) or 0)


class RecurrentCell(nn.Module):
    """A GRU or LSTM cell whose state is one tensor (an LSTM's ``h`` then ``c``), and the projection of its
    output (zero at first, so that a fresh network acts as the feed-forward one): what both memory cores step.

    Args:
        d_model: the trunk's width.
        config: the kind and the width of the state.
    """

    def __init__(self, d_model: int, config: MemoryConfig) -> None:
        super().__init__()
        self.kind, self.size = config.kind, config.size
        self.cell = nn.GRUCell(d_model, config.size) if config.kind == "gru" else nn.LSTMCell(d_model, config.size)
        self.out = nn.Linear(config.size, d_model)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    @property
    def state_size(self) -> int:
        """Floats of state: ``size`` for a GRU, ``2 * size`` for an LSTM (``h`` then ``c``)."""
        return self.size if self.kind == "gru" else 2 * self.size

    def step(self, inputs: torch.Tensor, state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """One step of the cell: ``inputs`` ``[n, d_model]``, ``state`` ``[n, state_size]`` -> the output ``h``
        ``[n, size]`` and the new state ``[n, state_size]``."""
        if self.kind == "gru":
            new = self.cell(inputs, state)  # [n, size]
            return new, new
        h, c = self.cell(inputs, tuple(state.split(self.size, dim=1)))
        return h, torch.cat([h, c], dim=1)  # [n, size], [n, 2 * size]


class MemoryCore(RecurrentCell):
    """The recurrent core: pooled row summary -> GRU / LSTM cell -> projection added to the row's tokens.

    Args:
        d_model: the trunk's width.
        config: the kind and the width of the state.

    Shape:
        pooled: ``[L * S, d_model]`` (time-major) -> ``([L * S, d_model], [S, state_size])``.
    """

    def recurrence(self, memory: Any, episode_start: Any, n_rows: int, length: int, device: torch.device,
                   where: str) -> Recurrence:
        """Checks one call's recurrent inputs against ``n_rows`` rows in sequences of ``length`` steps.

        Raises:
            ValueError / TypeError: a missing input, a state of another width (a checkpoint's, say), or
                rows that do not make whole sequences.
        """
        if memory is None or episode_start is None:
            missing = "memory" if memory is None else "episode_start"
            raise ValueError(f"{where}: this network has memory (model.memory), but no {missing!r} was given; pass "
                             f"the rows' state (float [B, {self.state_size}]) and episode_start (bool [B, 1]), as "
                             "the frames' collectors and evaluation do")
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(f"{where}: sequence_length must be an int >= 1, got {length!r}")
        if n_rows % length:
            raise ValueError(f"{where}: {n_rows} rows are not whole sequences of sequence_length={length}")
        memory = torch.as_tensor(memory).to(device)
        start = torch.as_tensor(episode_start).to(device)
        n_seq = n_rows // length
        if memory.dim() != 2 or memory.shape[1] != self.state_size:
            raise ValueError(f"{where}: memory has shape {tuple(memory.shape)}; this network's state is "
                             f"[B, {self.state_size}] (model.memory: {self.kind}, size {self.size})")
        if memory.shape[0] not in (n_rows, n_seq):
            raise ValueError(f"{where}: memory has {memory.shape[0]} rows; expected {n_rows} (one per row)")
        if start.dtype != torch.bool or start.numel() != n_rows:
            raise TypeError(f"{where}: episode_start must be bool [B, 1] with B = {n_rows}, got "
                            f"{start.dtype} {tuple(start.shape)}")
        return Recurrence(memory[:n_seq].float(), start.reshape(n_rows), length)

    def forward(self, pooled: torch.Tensor, recurrence: Recurrence) -> Tuple[torch.Tensor, torch.Tensor]:
        length = recurrence.length
        n_seq = pooled.shape[0] // length
        steps = pooled.float().reshape(length, n_seq, -1)  # [L, S, d_model]
        keep = (~recurrence.episode_start).reshape(length, n_seq, 1).float()  # [L, S, 1]
        state: Optional[Any] = recurrence.memory  # [S, state_size]
        outputs = []
        for t in range(length):
            h, state = self.step(steps[t], state * keep[t])  # [S, size], [S, state_size]
            outputs.append(h)
        hidden = torch.stack(outputs).reshape(length * n_seq, self.size)  # [L * S, size]
        return self.out(hidden).to(pooled.dtype), state


class EntityMemoryCore(RecurrentCell):
    """One recurrent state per entity (``model.memory.per_entity``): each entity's token after the trunk steps
    its own GRU / LSTM cell state, and a projection of the new state (zero at first) is added to that token.

    An entity's state is given per entity type in the entities' own layout (``entity_memory``: type -> ragged
    float ``[n_entities, state_size]``, the state the entity reached at its previous appearance, zeros for one
    seen the first time in its episode) and comes back the same way, the state its next appearance takes.
    Over sequences (training), ``entity_handles`` (type -> ragged int64 ``[n_entities, 1]``: the entity's
    number in its episode) links each appearance to the entity's previous one in the same sequence and
    episode, whose unrolled state it then takes; an entity's first appearance in a sequence starts from the
    state given with it.

    Args:
        d_model: the trunk's width.
        config: the kind and the width of the state (the game's ``size``).
    """

    def stream(self, given: Any, dest: Dict[str, torch.Tensor], n_tokens: int, width: int, dtype: torch.dtype,
               device: torch.device, name: str, counts: Dict[str, int]) -> torch.Tensor:
        """A per-type input (``entity_memory`` or ``entity_handles``) laid out in token stream order
        (``[n_tokens, width]``, zeros for tokens no type gives, e.g. the ``__global__`` one).

        Raises:
            ValueError / TypeError: a missing or unknown type, or a type whose rows or width differ from its
                entities'.
        """
        where = f"RogueNet: {name}"
        if not isinstance(given, Mapping):
            raise TypeError(f"{where}: expected entity type -> ragged [n_entities, {width}], got "
                            f"{type(given).__name__}")
        unknown = sorted(set(given) - set(counts))
        if unknown:
            raise ValueError(f"{where}: {unknown} are not entity types of this batch; expected {sorted(counts)}")
        out = torch.zeros(n_tokens, width, dtype=dtype, device=device)
        for etype, n in counts.items():
            if etype not in given:
                if n:
                    raise ValueError(f"{where}: entity type {etype!r} is missing ({n} entities in the batch)")
                continue
            data = to_ragged_tensor(given[etype], device, f"{where}['{etype}']").data
            if data.shape[0] != n or (n and data.reshape(n, -1).shape[1] != width):
                raise ValueError(f"{where}['{etype}']: shape {tuple(data.shape)}; expected [{n}, {width}] (one row per "
                                 f"entity of the type; model.memory {self.kind}, size {self.size})")
            if n:
                out[dest[etype]] = data.reshape(n, width).to(dtype)
        return out

    def forward(self, x: torch.Tensor, tokens: Any, given: Mapping[str, Any], handles: Optional[Mapping[str, Any]],
                episode_start: torch.Tensor, length: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Steps every entity token's state; returns what is added to the tokens (``[n_tokens, d_model]``) and
        each type's next states, ``[n_entities, state_size]`` in the entities' order.

        Args:
            x: the trunk's output ``[n_tokens, d_model]`` (rows time-major over ``length`` steps).
            tokens: the forward's ``TokenBatch``.
            given: ``entity_memory``. handles: ``entity_handles`` (needed when ``length > 1``).
            episode_start: bool ``[B]``: the row's step begins an episode (its entities start from zeros).
        """
        layout, dest = tokens.layout, {k: v for k, v in tokens.dest.items() if k in tokens.features}
        counts = {etype: int(d.shape[0]) for etype, d in dest.items()}
        n_tokens, device = layout.n_tokens, x.device
        state_in = self.stream(given, dest, n_tokens, self.state_size, torch.float32, device, "entity_memory", counts)
        entity = torch.cat(list(dest.values())) if dest else torch.zeros(0, dtype=torch.long, device=device)
        keep = (~episode_start.reshape(-1))[layout.batch_index].unsqueeze(1).float()  # [n_tokens, 1]
        state_in = state_in * keep
        steps = self._steps(entity, layout, length)
        slot = linked = None
        if length > 1:
            if handles is None:
                raise ValueError("RogueNet: entity_handles are needed to train per-entity memory over sequences "
                                 f"(sequence_length={length}); the collectors store them with every row")
            handle = self.stream(handles, dest, n_tokens, 1, torch.long, device, "entity_handles", counts)
            slot, linked, n_slots = _entity_slots(handle.reshape(-1), layout, episode_start, entity, length)
            latest = state_in.new_zeros(n_slots, self.state_size)  # each entity's state at its latest appearance
        outputs, states = [], []
        for idx in steps:
            start = state_in.index_select(0, idx)  # [n_t, state_size]
            if slot is not None:
                mine = slot.index_select(0, idx)  # [n_t]
                start = torch.where(linked.index_select(0, idx).unsqueeze(1), latest.index_select(0, mine), start)
            h, new = self.step(x.index_select(0, idx).float(), start)  # [n_t, size], [n_t, state_size]
            if slot is not None:
                latest = latest.index_copy(0, mine, new)
            outputs.append(h)
            states.append(new)
        every = torch.cat(steps)
        hidden = x.new_zeros(n_tokens, self.size, dtype=torch.float32).index_copy(0, every, torch.cat(outputs))
        state = state_in.index_copy(0, every, torch.cat(states))
        added = self.out(hidden).to(x.dtype) * _is_entity(entity, n_tokens)
        return added, {etype: state.index_select(0, d) for etype, d in dest.items()}

    @staticmethod
    def _steps(entity: torch.Tensor, layout: Any, length: int) -> List[torch.Tensor]:
        """The entity tokens of each step ``t`` of the sequences (rows ``t * S`` to ``(t + 1) * S``)."""
        if length == 1:
            return [entity]
        step_of = layout.batch_index.index_select(0, entity) // (layout.n_rows // length)  # [n_entity_tokens]
        order = torch.argsort(step_of, stable=True)
        sizes = torch.bincount(step_of, minlength=length).tolist()  # one host copy
        return list(entity.index_select(0, order).split(sizes))


def _is_entity(entity: torch.Tensor, n_tokens: int) -> torch.Tensor:
    mark = torch.zeros(n_tokens, 1, device=entity.device)
    mark[entity] = 1.0
    return mark  # [n_tokens, 1]


def _entity_slots(handle: torch.Tensor, layout: Any, episode_start: torch.Tensor, entity: torch.Tensor,
                  length: int) -> Tuple[torch.Tensor, torch.Tensor, int]:
    """Each token's entity within its sequence and episode (its slot, int64 ``[n_tokens]``), whether an earlier
    step of the sequence showed that entity (bool ``[n_tokens]``: the token takes the state its latest
    appearance left rather than the one stored with it), and the number of slots.

    Rows are time-major (row ``t * S + s`` is step ``t`` of sequence ``s``); ``episode_start`` splits a sequence
    into episodes, whose handles are numbered afresh.
    """
    n_seq = layout.n_rows // length
    start = episode_start.reshape(length, n_seq).to(torch.long)  # [L, S]
    episode = torch.cumsum(start, dim=0).reshape(-1)  # [B]: the episode within the row's sequence
    rows = layout.batch_index.index_select(0, entity)
    key = torch.stack([rows % n_seq, episode.index_select(0, rows), handle.index_select(0, entity), rows // n_seq])
    key = key.cpu().numpy()  # one host copy: the grouping below
    groups, slot_of = np.unique(key[:3], axis=1, return_inverse=True)  # [3, n_slots], [n_entity_tokens]
    order = np.lexsort(key[::-1])  # by sequence, episode, handle, then step
    seen = np.zeros(key.shape[1], dtype=np.bool_)
    seen[order[1:]] = slot_of.reshape(-1)[order[1:]] == slot_of.reshape(-1)[order[:-1]]  # a later appearance
    tokens = entity.cpu().numpy()
    slot = np.zeros(layout.n_tokens, dtype=np.int64)
    linked = np.zeros(layout.n_tokens, dtype=np.bool_)
    slot[tokens], linked[tokens] = slot_of.reshape(-1), seen
    device = entity.device
    return torch.from_numpy(slot).to(device), torch.from_numpy(linked).to(device), groups.shape[1]


class RecurrentInputs(NamedTuple):
    """A call's recurrent inputs as the caller gave them (unchecked): :class:`MemoryCore`'s ``memory``,
    ``episode_start`` and ``sequence_length``, and :class:`EntityMemoryCore`'s ``entity_memory`` and
    ``entity_handles``."""

    memory: Any = None
    episode_start: Any = None
    sequence_length: int = 1
    entity_memory: Any = None
    entity_handles: Any = None


class NextStates(NamedTuple):
    """The states a call leaves: the rows' (``[S, state_size]``, None without memory) and each entity
    type's (type -> ``[n_entities, state_size]``, None without per-entity memory)."""

    memory: Optional[torch.Tensor] = None
    entity_memory: Optional[Dict[str, torch.Tensor]] = None


def run_memory(game: Optional[MemoryCore], entity: Optional["EntityMemoryCore"], tokens: Any, x: torch.Tensor,
               inputs: RecurrentInputs, device: torch.device) -> Tuple[torch.Tensor, NextStates]:
    """The trunk's output ``x`` with what the memory cores add to its tokens, and the states they leave
    (``x`` as it is and no states without memory).

    Raises:
        ValueError / TypeError: missing or malformed recurrent inputs (see the cores).
    """
    if game is None:
        return x, NextStates()
    layout = tokens.layout
    recurrence = game.recurrence(inputs.memory, inputs.episode_start, layout.n_rows, inputs.sequence_length,
                                 device, "RogueNet")
    pooled = segment_pool(x, layout.batch_index, layout.n_rows, "mean")  # [B, d_model]
    added, state = game(pooled, recurrence)  # [B, d_model], [S, state_size]
    out = x + added.index_select(0, layout.batch_index)
    if entity is None:
        return out, NextStates(state)
    if inputs.entity_memory is None:
        raise ValueError("RogueNet: this network keeps a state per entity (model.memory.per_entity), but no "
                         "'entity_memory' was given; pass each entity type's states (ragged float [n_entities, "
                         f"{entity.state_size}], zeros for entities seen the first time), as the frames' collectors "
                         "and evaluation do")
    added, states = entity(x, tokens, inputs.entity_memory, inputs.entity_handles, recurrence.episode_start,
                           recurrence.length)
    return out + added, NextStates(state, states)
