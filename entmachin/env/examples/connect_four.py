"""ConnectFour: two players drop pieces into a 6 x 7 grid; four in a line wins.

Game: seats ``"0"`` and ``"1"`` take turns, seat ``"0"`` first. A move drops one piece into a
column that is not full; it lands on the lowest free row (row 0 is the bottom). A player who
completes a line of four of their own pieces (vertical, horizontal or diagonal) wins at once;
when all 42 cells are filled without such a line the game is drawn.

Observed, from each seat's own side: ``Mine`` (that seat's pieces) and ``Theirs`` (the other
seat's), with features ``row``, ``col``; seven ``Column`` entities with features ``row``,
``col``, where ``row`` is the landing row of the column's next piece (its height; 6 when full);
one ``Mover`` entity (id ``MOVER_ID``) with feature ``to_move`` (1.0 on the seat's turn, else
0.0). The ``Column`` entities sit at the cells a drop would fill, so that with relative-position
attention over (``col``, ``row``) each one sees the pieces a drop there would join in a line; the
``Mover`` takes the action and attends to them all.

Actions (taken by the ``Mover`` of the seat to move), as ``ConnectFour(choose=...)`` says:
``"drop"`` (the default): ``drop`` is categorical with choices ``"0"`` .. ``"6"`` (the column); full
columns are masked. ``"column"``: ``drop`` selects one of the ``Column`` entities (ids
``COLUMN_IDS``; the full ones are not selectable), so that a policy scores each column from that
column's own embedding (a pointer over the columns) instead of from the ``Mover``'s alone. The seat
not to move, and every seat once the game is over, has no actors; ``act`` takes an empty mapping (or
a ``drop`` without actors) for it.

Symmetry: ``mirror``, the board reflected left to right (``symmetries()``; ``rollout.symmetries: [mirror]``
trains on every row and its mirror image).

Reward: on the final step +1 to the winner and -1 to the loser (0 each for a draw), stated as
each seat's ``result`` (``"win"``, ``"loss"``, ``"draw"``); 0 on every other step.

The board is kept as one bitboard per seat (bit ``7 * col + row``, a spare bit atop each
column), so a four-in-a-line test is four shift-and-mask pairs (``_connected``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from entmachin.env.action import (
    Action,
    ActionSpace,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)
from entmachin.env.common import ActionName
from entmachin.env.environment import Entity, Observation, ObsSpace
from entmachin.env.examples._checks import (check_choice, check_one_of, expect_action_type, expect_one_choice,
                                            seat_action)
from entmachin.env.multi_agent import MultiAgentEnvironment, Seat, SeatActions, check_by_seat
from entmachin.env.symmetry import Symmetry

ROWS, COLS = 6, 7
SEATS = ["0", "1"]
DROP = "drop"
COLUMNS = [str(c) for c in range(COLS)]
MOVER_ID = 0
COLUMN_IDS = list(range(1, COLS + 1))  # the Column entities' ids with ``choose="column"``: column c is id c + 1
CHOOSE = ("drop", "column")
_SHIFTS = (1, 7, 6, 8)  # bitboard steps: up a column, along a row, and the two diagonals


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_TO_MOVE = _frozen(np.ones((1, 1), dtype=np.float32))  # [1, 1]
_WAITING = _frozen(np.zeros((1, 1), dtype=np.float32))  # [1, 1]
_NO_CHOICES = _frozen(np.zeros((0, COLS), dtype=np.bool_))  # [0, 7]


def _connected(bits: int) -> bool:
    """Whether the bitboard ``bits`` holds four in a line."""
    for s in _SHIFTS:
        pairs = bits & (bits >> s)
        if pairs & (pairs >> 2 * s):
            return True
    return False


class ConnectFour(MultiAgentEnvironment):
    """Connect Four for two seats, observed from each seat's side.

    Shape:
        ``Mine`` ``[n_mine, 2]``, ``Theirs`` ``[n_theirs, 2]``, ``Column`` ``[7, 2]``, ``Mover``
        ``[1, 1]``; ``drop`` mask ``[1, 7]`` for the seat to move, ``[0, 7]`` otherwise.
    """

    def __init__(self, choose: str = "drop") -> None:
        """Args:
            choose: how the seat to move names its column: ``"drop"``, a categorical choice of the
                ``Mover``; ``"column"``, the ``Mover`` selects a ``Column`` entity (module docstring).
        """
        self.choose = check_one_of("ConnectFour", "choose", choose, CHOOSE)
        self.rng = np.random.default_rng()
        self.reset()

    def seats(self) -> List[Seat]:
        return list(SEATS)

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Mine": Entity(["row", "col"]),
                "Theirs": Entity(["row", "col"]),
                "Column": Entity(["row", "col"]),
                "Mover": Entity(["to_move"]),
            }
        )

    def action_space(self) -> Dict[ActionName, ActionSpace]:
        if self.choose == "column":
            return {DROP: SelectEntityActionSpace()}
        return {DROP: CategoricalActionSpace(list(COLUMNS))}

    def symmetries(self) -> Dict[str, Symmetry]:
        """``mirror``: the board reflected left to right (column ``c`` becomes ``6 - c``; with ``choose="drop"``
        the choice of column ``c`` becomes ``6 - c``; a selected Column entity stays selected, its ``col`` mirrored)."""
        flip = {t: {"col": (-1.0, float(COLS - 1))} for t in ("Mine", "Theirs", "Column")}
        return {"mirror": Symmetry(flip, {} if self.choose == "column" else {DROP: list(range(COLS))[::-1]})}

    def reset(self) -> Dict[Seat, Observation]:
        self.bits = [0, 0]
        self.heights = [0] * COLS
        self.turn = 0  # index of the seat to move
        self.winner: Optional[int] = None
        self.over = False
        # New arrays every game: earlier observations hold views of the old ones.
        self.pieces = [np.zeros((COLS * ROWS // 2, 2), dtype=np.float32) for _ in SEATS]  # [21, 2] (row, col)
        self.counts = [0, 0]
        self.columns = np.zeros((COLS, 2), dtype=np.float32)  # [7, 2] (landing row, col)
        self.columns[:, 1] = np.arange(COLS)
        self.free = np.ones((1, COLS), dtype=np.bool_)  # [1, 7]
        return self._observe()

    def act(self, actions: Mapping[Seat, SeatActions]) -> Dict[Seat, Observation]:
        # Every check comes before the state changes.
        if self.over:
            raise ValueError("ConnectFour.act: the game is over; call reset()")
        check_by_seat("ConnectFour.act", actions, SEATS, "actions")
        seat, waiting = SEATS[self.turn], SEATS[1 - self.turn]
        _expect_idle(actions[waiting], waiting, seat)
        key = seat_action(seat, DROP)
        if self.choose == "column":
            drop = expect_action_type("ConnectFour", key, actions[seat].get(DROP), SelectEntityAction)
            expect_one_choice("ConnectFour", key, drop, MOVER_ID)
            if drop.actees[0] not in COLUMN_IDS:
                raise ValueError(f"ConnectFour.act: actions['{key}'] selected entity {drop.actees[0]!r}, which is "
                                 f"not a Column (ids {COLUMN_IDS[0]}..{COLUMN_IDS[-1]})")
            col = COLUMN_IDS.index(drop.actees[0])
        else:
            drop = expect_action_type("ConnectFour", key, actions[seat].get(DROP), CategoricalAction)
            expect_one_choice("ConnectFour", key, drop, MOVER_ID)
            col = check_choice("ConnectFour", key, drop.indices[0], COLS)
        row = self.heights[col]
        if row == ROWS:
            raise ValueError(f"ConnectFour.act: actions['{seat}']['{DROP}'] chose column {col}, which is full")

        me = self.turn
        self.bits[me] |= 1 << (7 * col + row)
        self.heights[col] = row + 1
        self.pieces[me][self.counts[me]] = (row, col)
        self.counts[me] += 1
        self.columns = self.columns.copy()
        self.columns[col, 0] = row + 1
        if row + 1 == ROWS:
            self.free = self.free.copy()
            self.free[0, col] = False
        if _connected(self.bits[me]):
            self.winner, self.over = me, True
        elif sum(self.counts) == ROWS * COLS:
            self.over = True
        self.turn = 1 - me
        return self._observe()

    def _observe(self) -> Dict[Seat, Observation]:
        out = {}
        for s, seat in enumerate(SEATS):
            moves = s == self.turn and not self.over
            reward, result = 0.0, None
            if self.over:
                reward = 0.0 if self.winner is None else (1.0 if self.winner == s else -1.0)
                result = "draw" if self.winner is None else ("win" if self.winner == s else "loss")
            out[seat] = Observation(
                features={
                    "Mine": self.pieces[s][: self.counts[s]],  # [n_mine, 2]
                    "Theirs": self.pieces[1 - s][: self.counts[1 - s]],  # [n_theirs, 2]
                    "Column": self.columns,  # [7, 2]
                    "Mover": _TO_MOVE if moves else _WAITING,  # [1, 1]
                },
                ids={"Mover": [MOVER_ID], **({"Column": COLUMN_IDS} if self.choose == "column" else {})},
                actions={DROP: self._mask(moves)},
                reward=reward,
                done=self.over,
                result=result,
            )
        return out


    def _mask(self, moves: bool) -> Any:
        """The ``drop`` mask of a seat that ``moves`` (or not)."""
        if self.choose == "column":
            legal = [COLUMN_IDS[c] for c in np.flatnonzero(self.free[0])] if moves else []
            return SelectEntityActionMask(actor_ids=[MOVER_ID] if moves else [], actee_ids=legal)
        return CategoricalActionMask(actor_ids=[MOVER_ID] if moves else [], mask=self.free if moves else _NO_CHOICES)


def _expect_idle(actions: SeatActions, seat: Seat, mover: Seat) -> None:
    """Raise unless ``actions`` (of the seat not to move) is empty or a ``drop`` without actors."""
    for name, action in actions.items():
        if name != DROP or not isinstance(action, (CategoricalAction, SelectEntityAction)) or len(action.actors):
            raise ValueError(
                f"ConnectFour.act: actions['{seat}']['{name}'] is given, but seat '{seat}' is not to move "
                f"(seat '{mover}' is); give it an empty mapping"
            )


def connect_four_opponent(
    observation: Observation, action_space: Mapping[ActionName, ActionSpace], rng: np.random.Generator
) -> Dict[ActionName, Action]:
    """Win if a drop wins, else block the other seat's winning drop, else a random legal column.

    Reads only ``observation``: the board from its ``Mine`` / ``Theirs`` entities, the legal
    columns and the actor from its ``drop`` mask (either kind of ``choose``). Returns ``{}`` when the
    seat is not to move.

    Args:
        observation: the seat's observation.
        action_space: the game's action space; whether ``drop`` selects a column entity or picks a
            categorical column decides the kind of action returned.
        rng: draws the random legal column.
    """
    return _tactical(observation, action_space, lambda legal: rng.choice(legal))


def centre_opponent(
    observation: Observation, action_space: Mapping[ActionName, ActionSpace], rng: np.random.Generator
) -> Dict[ActionName, Action]:
    """Win if a drop wins, else block, else a legal column drawn with weights favouring the centre
    (``4 - |column - 3|``: the centre four times as likely as an edge): a second tactical opponent,
    stronger than ``scripted`` (it wins 0.61 of their games), for measuring a policy against an
    opponent it never trained with (``--opponent entmachin.env.examples.connect_four:centre_opponent``).
    Its draws keep the games apart: a deterministic opponent would replay the same game against a
    policy whose choices are nearly certain."""
    def centred(legal: np.ndarray) -> Any:
        weights = COLS // 2 + 1 - np.abs(legal - COLS // 2)
        return rng.choice(legal, p=weights / weights.sum())

    return _tactical(observation, action_space, centred)


def _tactical(observation: Observation, action_space: Mapping[ActionName, ActionSpace],
              otherwise: Any) -> Dict[ActionName, Action]:
    """A winning drop, else a blocking one, else ``otherwise(legal columns)``."""
    amask = observation.actions[DROP]
    if not len(amask.actor_ids):
        return {}
    if isinstance(action_space[DROP], SelectEntityActionSpace):
        legal = np.array([COLUMN_IDS.index(i) for i in amask.actee_ids], dtype=np.int64)
    else:
        legal = np.flatnonzero(np.asarray(amask.mask).reshape(-1))
    heights, *boards = read_board(observation)
    choice = None
    for bits in boards:  # first a winning drop of ours, then one of theirs to block
        wins = [c for c in legal if _connected(bits | 1 << (7 * int(c) + int(heights[c])))]
        if wins:
            choice = wins[0]
            break
    if choice is None:
        choice = otherwise(legal)
    return drop_action(action_space, int(choice), amask.actor_ids[0])


def read_board(observation: Observation) -> Tuple[np.ndarray, int, int]:
    """``(heights, ours, theirs)`` from a seat's ``observation``: int64 ``[COLS]`` pieces in each column,
    and the seat's and the other seat's bitboards (bit ``7 * col + row``)."""
    mine, theirs = (np.asarray(observation.features[t], dtype=np.int64).reshape(-1, 2) for t in ("Mine", "Theirs"))
    heights = np.bincount(np.concatenate([mine[:, 1], theirs[:, 1]]), minlength=COLS)
    ours, other = (int(np.bitwise_or.reduce(np.left_shift(1, 7 * p[:, 1] + p[:, 0]), initial=0)) for p in (mine, theirs))
    return heights, ours, other


def drop_action(action_space: Mapping[ActionName, ActionSpace], column: int,
                actor: Any = MOVER_ID) -> Dict[ActionName, Action]:
    """The actions of a seat that drops into ``column``, in the kind ``action_space`` says (either ``choose``)."""
    if isinstance(action_space[DROP], SelectEntityActionSpace):
        return {DROP: SelectEntityAction([actor], [COLUMN_IDS[column]])}
    labels = action_space[DROP].index_to_label
    return {DROP: CategoricalAction([actor], np.array([column], dtype=np.int64), list(labels))}


ConnectFour.scripted_opponent = staticmethod(connect_four_opponent)
