"""Action values as the DQN frames read them: per-actor tables, checks, greedy and n-step targets.

A Q-network returns either a dense ``[B, n_actions]`` tensor (Machin's form; a ``mask`` entry of the state, bool
``[B, n_actions]``, forbids actions) or, for entity states, one ragged ``[n_actors, width]`` per action
(``RogueNet.q_values``). Both become a list of :class:`QTable` (a dense row is one actor). An action's value in a
row is the sum (or the mean) of its actors' values; a row's value is the sum over its actions. Forbidden choices
must be ``-inf`` in the network's output: a finite value there means the network ignores the mask.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch

from entmachin.env.action import SelectEntityActionSpace
from entmachin.model.heads import select_entity_allowed
from entmachin.model.inputs import DeferredChecks, parse_action_masks
from entmachin.model.wrappers import unwrap
from entmachin.ragged.tensor import RaggedTensor, to_ragged_tensor

__all__ = ["QTable", "read_q", "row_values", "taken_values", "best_values", "greedy", "explore", "n_step_returns",
           "NStep", "stored_actions"]

DENSE = "action"  # the table name of a dense network's one action


class QTable(NamedTuple):
    """One action's values.

    Attributes:
        name: the action name (``"action"`` for a dense network).
        q: float ``[n_actors, width]``, ``-inf`` where forbidden.
        allowed: bool ``[n_actors, width]``: the choices the state allows.
        row: int64 ``[n_actors]``: each actor's row.
        dense: one actor per row, in row order (a dense network's table): a row's value is its actor's value.
        masked: some choice may be forbidden (False: a dense network's table without ``mask``).
    """

    name: str
    q: torch.Tensor
    allowed: torch.Tensor
    row: torch.Tensor
    dense: bool = False
    masked: bool = True


@functools.lru_cache(maxsize=32)
def _dense_constants(n_rows: int, width: int, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """All-True ``allowed`` ``[B, n_actions]`` and ``row`` ``[B]`` of a dense table, made once (nothing writes them)."""
    with torch.inference_mode(False):  # plain tensors even when first made under inference_mode
        return torch.ones(n_rows, width, dtype=torch.bool, device=device), torch.arange(n_rows, device=device)


def _mask_checks(table: QTable, checks: DeferredChecks, where: str) -> None:
    """Registers the checks: no finite value where a ``masked`` table forbids, no NaN or infinity where it allows."""
    if not checks.enabled:  # the update's trusted rows: nothing computed
        return
    q, allowed = table.q, table.allowed
    if table.masked:
        ignored = ~allowed & (q > float("-inf"))  # [n_actors, width]: a finite value where the mask forbids

        def ignored_message() -> str:
            a = int(torch.nonzero(ignored)[0, 0])
            return (f"{where}: the Q-network's output ignores the mask: action {table.name!r} actor {a} (row "
                    f"{int(table.row[a])}) has a finite value for a choice its mask forbids; a Q-network must give "
                    "forbidden choices -inf (MLPQNet(mask=...) and RogueNet.q_values do)")

        checks.add(ignored.any(), ignored_message)
    bad = (allowed & ~torch.isfinite(q)).any() if table.masked else ~torch.isfinite(q).all()  # unmasked: all allowed
    checks.add(bad, lambda: f"{where}: the Q-network returned NaN or infinity for an allowed choice of action "
                            f"{table.name!r}; its weights or inputs may hold NaN or infinity; nothing was stepped")


def read_q(out: Any, state: Mapping[str, Any], qnet: Any, n_rows: int, where: str,
           checks: DeferredChecks) -> List[QTable]:
    """The tables of a Q-network's output for ``state`` (``n_rows`` rows); value checks go to ``checks``.

    Raises:
        TypeError / ValueError: an output of the wrong kind or shape (the message names it).
    """
    if isinstance(out, (tuple, list)) and out:
        out = out[0]  # Machin's (values, others...) return
    if isinstance(out, torch.Tensor):
        if out.dim() != 2 or out.shape[0] != n_rows or out.shape[1] < 1:
            raise ValueError(f"{where}: the Q-network returned shape {tuple(out.shape)}; expected [B, n_actions] "
                             f"with B = {n_rows} (one row of action values per state row)")
        allowed, row = _dense_constants(n_rows, out.shape[1], out.device)  # [B, n_actions], [B]
        mask = state.get("mask")
        if mask is not None:
            allowed = torch.as_tensor(mask, device=out.device).to(torch.bool)  # [B, n_actions]
            if allowed.shape != out.shape:
                raise ValueError(f"{where}: state['mask'] has shape {tuple(allowed.shape)} but the Q-network returned "
                                 f"{tuple(out.shape)}; the mask needs one entry per action value")
        table = QTable(DENSE, out, allowed, row, True, mask is not None)
        _mask_checks(table, checks, where)
        return [table]
    if not isinstance(out, Mapping):
        raise TypeError(f"{where}: the Q-network returned a {type(out).__name__}; expected a tensor [B, n_actions] "
                        "or, for entity states, action name -> ragged [n_actors, n_choices] (RogueNet.q_values)")
    inner = unwrap(qnet)
    space = getattr(getattr(inner, "__self__", inner), "action_space", None)
    if not isinstance(space, Mapping) or not isinstance(state.get("action_masks"), Mapping):
        raise TypeError(f"{where}: the Q-network returned per-action values, which needs an entity state with "
                        "'action_masks' and a network with an action_space attribute (as RogueNet has)")
    tables = []
    device = next((v.data.device for v in out.values() if isinstance(v, RaggedTensor)), torch.device("cpu"))
    for name, mask in parse_action_masks(space, state["action_masks"], device, checks).items():
        value = out.get(name)
        if not isinstance(value, RaggedTensor):
            raise ValueError(f"{where}: the Q-network's output has {type(value).__name__} for action {name!r}; "
                             "expected a ragged [n_actors, n_choices] for every action of the state's action_masks")
        q = value.data  # [n_actors, width]
        actors = mask.actors
        if isinstance(space[name], SelectEntityActionSpace):
            allowed = select_entity_allowed(actors, mask.actees, mask.actee_mask)  # [n_actors, width]
        elif mask.mask is not None:
            allowed = mask.mask  # [n_actors, n_choices]
        else:
            allowed = torch.ones(actors.n_items, len(space[name].index_to_label), dtype=torch.bool)
        if q.dim() != 2 or tuple(q.shape) != tuple(allowed.shape) or len(value) != n_rows:
            raise ValueError(f"{where}: the Q-network's values of action {name!r} have shape {tuple(q.shape)} in "
                             f"{len(value)} rows; expected [n_actors, n_choices] = {tuple(allowed.shape)} in "
                             f"{n_rows} rows (one value per choice per actor)")
        allowed = allowed.to(q.device)
        if checks.enabled:
            checks.add((value.lengths.to(actors.lengths.device) != actors.lengths).any(),
                       lambda n=name: f"{where}: the Q-network's values of action {n!r} have other row lengths than "
                                      "the state's actors (one row of values per actor)")
        table = QTable(name, q, allowed, actors.batch_index.to(q.device))
        _mask_checks(table, checks, where)
        tables.append(table)
    return tables


def stored_actions(action: Mapping[str, Any], tables: Sequence[QTable], where: str,
                   checks: DeferredChecks) -> List[torch.Tensor]:
    """Each table's stored choice per actor, int64 ``[n_actors]``, from a sampled ``action`` dict."""
    value = action.get("action") if isinstance(action, Mapping) else None
    out = []
    for table in tables:
        chosen = value.get(table.name) if isinstance(value, Mapping) else value if table.name == DENSE else None
        if chosen is not None and not isinstance(chosen, torch.Tensor):  # ragged [n_actors, 1]
            chosen = to_ragged_tensor(chosen, table.q.device, where).data
        n_actors, width = table.q.shape
        if chosen is None or chosen.numel() != n_actors:
            raise ValueError(f"{where}: the stored action {table.name!r} holds "
                             f"{None if chosen is None else tuple(chosen.shape)}; expected one choice per actor "
                             f"({n_actors})")
        index = chosen.reshape(-1).to(table.q.device, torch.int64)  # [n_actors]
        if checks.enabled:
            checks.add(((index < 0) | (index >= width)).any(),
                       lambda n=table.name, w=width: f"{where}: a stored choice of action {n!r} lies outside [0, {w}) "
                                                     "(the Q-network's width)")
        out.append(index)
    return out


def row_values(values: torch.Tensor, table: QTable, n_rows: int, reduction: str) -> torch.Tensor:
    """Per-actor ``values`` ``[n_actors]`` summed (or averaged) over each row's actors: ``[B]``."""
    if table.dense:
        return values + 0.0  # [B]: the sum (and the mean) of one value; 0 + x as index_add gives (+0 for -0)
    total = values.new_zeros(n_rows).index_add(0, table.row, values)  # [B]
    if reduction == "mean":
        count = values.new_zeros(n_rows).index_add(0, table.row, torch.ones_like(values))  # [B]
        total = total / count.clamp_min(1.0)
    return total


def _sum_rows(tables: Sequence[QTable], values: Sequence[Optional[torch.Tensor]], n_rows: int, reduction: str
              ) -> torch.Tensor:
    """The sum over the tables of :func:`row_values` of their per-actor ``values`` (None: left out), ``[B]``."""
    rows = [row_values(v, t, n_rows, reduction) for t, v in zip(tables, values) if v is not None]  # [B] each
    if not rows:  # the empty sum (a row_values sum is never -0: starting at rows[0], not zeros, changes nothing)
        return tables[0].q.new_zeros(n_rows) if tables else torch.zeros(n_rows)
    return sum(rows[1:], rows[0])


def taken_values(tables: Sequence[QTable], actions: Sequence[torch.Tensor], n_rows: int, reduction: str
                 ) -> torch.Tensor:
    """``Q(s, a)`` of each row: the stored choices' values, ``[B]``."""
    return _sum_rows(tables, [t.q.gather(1, i[:, None])[:, 0] for t, i in zip(tables, actions)], n_rows, reduction)


def greedy(tables: Sequence[QTable]) -> List[torch.Tensor]:
    """The best allowed choice of every actor, int64 ``[n_actors]`` per table."""
    return [t.q.argmax(dim=1) if t.q.shape[1] else t.q.new_zeros(t.q.shape[0], dtype=torch.int64) for t in tables]


def best_values(tables: Sequence[QTable], n_rows: int, reduction: str,
                choosers: Optional[Sequence[QTable]] = None) -> torch.Tensor:
    """Each row's value of its best choices, ``[B]``: the max of ``tables``, or (double DQN) the values in
    ``tables`` of the choices that are best in ``choosers``."""
    values: List[Optional[torch.Tensor]] = []
    for table, index in zip(tables, greedy(choosers if choosers is not None else tables)):
        best = table.q.gather(1, index[:, None])[:, 0] if table.q.shape[1] else None  # [n_actors]; no choice: none
        if best is not None and table.masked:  # unmasked values are all finite (checked; the update raises otherwise)
            best = torch.where(torch.isfinite(best), best, torch.zeros_like(best))  # an actor with no choice: 0
        values.append(best)
    return _sum_rows(tables, values, n_rows, reduction)


def explore(tables: Sequence[QTable], actions: List[torch.Tensor], epsilon: float, rng: np.random.Generator
            ) -> List[torch.Tensor]:
    """Replaces each actor's choice, with probability ``epsilon``, by a uniform allowed one."""
    out = []
    for table, chosen in zip(tables, actions):
        coin = rng.random(chosen.shape[0]) < epsilon  # [n_actors]
        if table.q.shape[1] and coin.any():
            scores = torch.rand(table.allowed.shape, device=chosen.device).masked_fill(~table.allowed, -1.0)
            chosen = torch.where(torch.from_numpy(coin).to(chosen.device), scores.argmax(dim=1), chosen)  # [n_actors]
        out.append(chosen)
    return out


class NStep(NamedTuple):
    """The n-step return of every row of ``T`` steps of ``B`` environments (step-major, ``N = T * B``).

    Attributes:
        reward: float64 ``[N]``: ``sum_k discount**k * r_{t+k}`` over the row's steps.
        terminal: bool ``[N]``: the episode ended within them (no bootstrap).
        discount: float64 ``[N]``: ``discount**k`` for the bootstrap value after ``k`` rewards.
        next_index: int64 ``[N]``: the row of the stacked inputs (``N`` states, then the ``next_state`` of the
            ``bootstrap`` rows) that holds the state to bootstrap from.
    """

    reward: np.ndarray
    terminal: np.ndarray
    discount: np.ndarray
    next_index: np.ndarray


def n_step_returns(reward: np.ndarray, terminal: np.ndarray, truncated: np.ndarray, bootstrap: np.ndarray,
                   n_step: int, discount: float) -> NStep:
    """n-step returns of ``[T, B]`` steps; a row's return stops at a terminal row (no bootstrap), a truncated row
    or the last step (bootstrap from that row's ``next_state``), or after ``n_step`` rewards (bootstrap from the
    state of the row that follows).

    ``bootstrap`` lists the rows whose ``next_state`` was stacked after the ``N`` states (truncated rows and the
    last step's rows that are not terminal, as ``rollout.read_*`` stack them).
    """
    n_steps, n_envs = reward.shape
    n_rows = n_steps * n_envs
    ret = np.zeros((n_steps, n_envs))  # [T, B]
    scale = np.ones((n_steps, n_envs))  # [T, B]: discount**k of the next reward
    alive = np.ones((n_steps, n_envs), dtype=np.bool_)  # [T, B]: still adding rewards
    ended = np.zeros((n_steps, n_envs), dtype=np.bool_)  # [T, B]
    last = np.broadcast_to(np.arange(n_steps)[:, None], (n_steps, n_envs)).copy()  # [T, B]: last row used
    for k in range(n_step):
        t = np.arange(n_steps) + k  # [T]
        j = np.minimum(t, n_steps - 1)  # [T]
        add = alive & (t < n_steps)[:, None]  # [T, B]
        ret += np.where(add, scale * reward[j], 0.0)
        scale = np.where(add, scale * discount, scale)
        last = np.where(add, j[:, None], last)
        ended |= add & terminal[j]
        alive = add & ~terminal[j] & ~truncated[j] & (j[:, None] < n_steps - 1)
    env = np.arange(n_envs)[None, :]
    flat_last = (last * n_envs + env).reshape(-1)  # [N]
    position = np.full(n_rows, -1, dtype=np.int64)  # [N]: row -> place among the bootstrap rows
    position[bootstrap] = np.arange(bootstrap.shape[0])
    follows = np.minimum(last + 1, n_steps - 1) * n_envs + env  # [T, B]
    next_index = np.where(position[flat_last] >= 0, n_rows + position[flat_last], follows.reshape(-1))
    next_index = np.where(ended.reshape(-1), flat_last, next_index)  # never read: a placeholder state
    return NStep(ret.reshape(-1), ended.reshape(-1), scale.reshape(-1), next_index.astype(np.int64))
