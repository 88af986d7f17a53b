"""The argument of each environment's ``step`` in ``GymnasiumVecEnv``: a ``VecEnv``'s ragged actions (one
actor per environment) turned into the choices of a ``Discrete`` or ``MultiDiscrete`` action space or the
values of a ``Box``, after fast checks; actions that fail them raise ``EnvList``'s error (``check_actions``)
or name what is missing.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional

import numpy as np

from entmachin.env.action import ActionSpace, GlobalContinuousActionSpace
from entmachin.env.common import ActionName
from entmachin.env.vec_actions import check_actions
from entmachin.env.vec_env import VecObs, ragged_actions
from entmachin.ragged.array import RaggedArray, RaggedArrayF32, RaggedArrayI64


class GymActions:
    """Turns the ragged actions of ``n`` gymnasium environments' rows into their ``step`` arguments.

    Args:
        gym_space: the environments' gymnasium action space.
        action_space: its entmachin action spaces, by name (``GymnasiumEnvironment.action_space()``).
        box: the ``Box`` action's ``GlobalContinuousActionSpace``, or None.
        n: the number of environments.
        check_vec: every row's masks, which ``check_actions`` checks refused actions against.
    """

    def __init__(self, gym_space: Any, action_space: Mapping[ActionName, ActionSpace],
                 box: Optional[GlobalContinuousActionSpace], n: int, check_vec: VecObs) -> None:
        from gymnasium import spaces  # optional dependency; GymnasiumEnvironment imported it already

        self._action_space = action_space
        self._names = list(action_space)
        self._check_vec = check_vec
        self._discrete = isinstance(gym_space, spaces.Discrete)
        self._box = box
        if self._discrete:
            self._start = int(gym_space.start)
        elif self._box is not None:
            self._act_shape = (n,) + tuple(gym_space.shape)  # [num_envs, *box.shape]
        else:
            self._act_dtype = gym_space.dtype
            self._act_shape = (n,) + tuple(np.shape(gym_space.nvec))  # [num_envs, *nvec.shape]
            self._act_start = np.asarray(getattr(gym_space, "start", 0), dtype=gym_space.dtype)
        # (name, n_choices) of each categorical action (a Box action has none).
        self._limits = [] if self._box is not None else \
            [(name, len(space.index_to_label)) for name, space in self._action_space.items()]
        self._ones_list = [1] * n  # [num_envs], what size1() of a valid action lists

    def __call__(self, actions: Mapping[ActionName, RaggedArray]) -> List[Any]:
        """What each environment's ``step`` receives, after checking ``actions``."""
        actions = ragged_actions(actions)
        if self._box is not None:
            return self._box_actions(actions)
        chosen: List[List[int]] = []  # per action name: [num_envs] choices
        for name, limit in self._limits:
            act = actions.get(name)
            # One actor (one value) in each environment's row: size1() lists num_envs ones.
            if type(act) is not RaggedArrayI64 or act.size2() != 1 or act.size1().tolist() != self._ones_list:
                return self._reject(actions)
            values = act.as_array().ravel().tolist()  # [num_envs] Python ints
            if min(values) < 0 or max(values) >= limit:
                return self._reject(actions)
            chosen.append(values)
        if len(actions) != len(self._limits):
            return self._reject(actions)
        if self._discrete:
            start = self._start  # Python ints, as GymnasiumEnvironment sends
            return chosen[0] if start == 0 else [start + v for v in chosen[0]]
        choice = np.array(chosen, dtype=self._act_dtype).T.reshape(self._act_shape)  # [num_envs, *nvec.shape]
        return list(choice + self._act_start)

    def _box_actions(self, actions: Mapping[ActionName, RaggedArray]) -> List[Any]:
        """A ``Box`` action's float32 values of each environment, in the Box's shape."""
        box = self._box
        act = actions.get("action")
        # One actor (one vector of the Box's width) in each environment's row.
        if len(actions) != 1 or type(act) is not RaggedArrayF32 or act.size2() != len(box) \
                or act.size1().tolist() != self._ones_list:
            return self._reject(actions)
        values = act.as_array()  # [num_envs, n_values]
        if not ((values >= box.low) & (values <= box.high)).all():  # NaN fails too
            return self._reject(actions)
        return list(np.array(values, dtype=np.float32).reshape(self._act_shape))  # [num_envs, *box.shape], copied

    def _reject(self, actions: Mapping[ActionName, RaggedArray]) -> List[Any]:
        """Raise ``EnvList``'s error for ``actions`` (the fast checks of ``__call__`` failed)."""
        check_actions(actions, self._check_vec, self._action_space)
        missing = [name for name in self._names if name not in actions]
        if missing:
            raise ValueError(f"GymnasiumVecEnv.act: actions {missing} are missing; got {list(actions)}")
        wide = {name: actions[name].size2() for name, _ in self._limits}
        raise ValueError(f"GymnasiumVecEnv.act: every action needs one value per actor; got widths {wide}")
