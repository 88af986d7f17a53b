"""``MLPQNet``: action values of a dense observation, for the DQN frames."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
from torch import nn

from entmachin.model.heads import dueling
from entmachin.model.mlp import Activation, Where, _DenseTrunk, _check_stored_choices

__all__ = ["MLPQNet"]


class MLPQNet(_DenseTrunk):
    """One value per discrete action of a feature vector (Machin's Q-network shape).

    Args:
        d_state: width of the observation vector.
        n_actions: number of choices.
        d_hidden: widths of the hidden layers.
        activation: hidden activation.
        dueling: a value and an advantage stream instead of one output layer.
        normalize_inputs: normalise observations with running statistics.
        clip: clip value of the input normalisation.

    Shape:
        state: ``[B, d_state]``; mask: bool ``[B, n_actions]`` or None; returns float
        ``[B, n_actions]``, ``-inf`` where the mask forbids the action.
    """

    def __init__(self, d_state: int, n_actions: int, *, d_hidden: Sequence[int] = (64, 64),
                 activation: Activation = "relu", dueling: bool = False, normalize_inputs: bool = False,
                 clip: float = 5.0) -> None:
        super().__init__("MLPQNet", d_state, d_hidden, activation, normalize_inputs, clip)
        if isinstance(n_actions, bool) or not isinstance(n_actions, int) or n_actions < 1:
            raise ValueError(f"MLPQNet: n_actions must be a positive int, got {n_actions!r}")
        self.n_actions = n_actions
        self.q = nn.Linear(self.d_out, n_actions)
        self.v = nn.Linear(self.d_out, 1) if dueling else None

    def forward(self, state: Any, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Every action's value in each row of ``state`` (float ``[B, d_state]``): ``[B, n_actions]``, ``-inf``
        where ``mask`` (bool ``[B, n_actions]``, True where allowed; None: all allowed) forbids the action.

        Raises:
            ValueError: a ``state`` or ``mask`` of the wrong shape.
        """
        h = self.features(state)  # [B, d_hidden[-1]]
        q = self.q(h)  # [B, n_actions]
        if mask is None:
            return q if self.v is None else dueling(q, self.v(h), torch.ones_like(q, dtype=torch.bool))
        mask = torch.as_tensor(mask, device=q.device).to(torch.bool)
        if mask.shape != q.shape:
            raise ValueError(f"MLPQNet.forward: mask has shape {tuple(mask.shape)}; expected [B, n_actions] = "
                             f"{tuple(q.shape)}")
        if self.v is not None:
            q = dueling(q, self.v(h), mask)
        return q.masked_fill(~mask, float("-inf"))  # [B, n_actions]

    def check_stored(self, state: Mapping[str, Any], action: Mapping[str, Any], role: str, where: Where) -> None:
        """A frame's store-time check (``entmachin.frame.store_checks``) of the stacked rows ``state`` and
        ``action``: ``state['state']`` is ``[N, d_state]`` and the stored choices ``action['action']`` lie in
        ``[0, n_actions)``; ``role`` (``"actor"`` or ``"critic"``) and ``where`` (which names a stored value) word
        the ``ValueError``."""
        super().check_stored(state, action, role, where)
        _check_stored_choices(self, self.n_actions, action, where)
