"""MLP actors and critic for dense observations, with Machin's ``(action, log_prob, entropy)`` return.

For problems whose observation is one feature vector per step (for example an environment
that only has global features). Each module can normalise its inputs with a running
``InputNorm`` that, as in RogueNet, learns only inside ``collecting_stats()``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Literal, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from entmachin.model.heads import masked_categorical
from entmachin.model.input_norm import InputNorm, NormalisedModule

Activation = Literal["tanh", "relu", "gelu"]
#: Names a stored value in messages: ``where(key, path="", row=None)`` -> ``"PPO.store_episode[0]['state']['state']"``,
#: or with ``row=r`` the transition and environment row of stacked row ``r``.
Where = Callable[..., str]
_STATE, _ACTION = "['state']", "['action']"
_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


def _layer(d_in: int, d_out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(d_in, d_out)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


class _DenseTrunk(NormalisedModule):
    """Optional input normalisation followed by hidden layers; shared by the MLP modules."""

    def __init__(self, owner: str, d_state: int, d_hidden: Sequence[int], activation: Activation,
                 normalize_inputs: bool, clip: float) -> None:
        super().__init__()
        if isinstance(d_state, bool) or not isinstance(d_state, int) or d_state < 1:
            raise ValueError(f"{owner}: d_state must be a positive int, got {d_state!r}")
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in d_hidden):
            raise ValueError(f"{owner}: d_hidden must hold positive ints, got {list(d_hidden)!r}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{owner}: activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.owner = owner
        self.d_state = d_state
        self.norm = InputNorm(d_state, clip, name=f"{owner} input norm of state") if normalize_inputs else None
        layers: list[nn.Module] = []
        d_in = d_state
        for d in d_hidden:
            layers += [_layer(d_in, d, math.sqrt(2)), _ACTIVATIONS[activation]()]
            d_in = d
        self.hidden = nn.Sequential(*layers)
        self.d_out = d_in

    def features(self, state: Any) -> torch.Tensor:
        # The first hidden layer's weight says where the trunk is, read from the module dicts
        # (cheaper than walking parameters(), or than Sequential's indexing).
        first = self._modules["hidden"]._modules.get("0")
        weight = None if first is None else first._parameters.get("weight")
        device = weight.device if weight is not None else next(self.parameters()).device
        if not isinstance(state, torch.Tensor):
            try:
                state = torch.as_tensor(state, dtype=torch.float32)
            except (TypeError, ValueError, RuntimeError) as e:
                raise TypeError(f"{self.owner}.forward: state must be a tensor [B, {self.d_state}], "
                                f"got {type(state).__name__}") from e
        if state.dim() != 2 or state.shape[1] != self.d_state:
            raise ValueError(
                f"{self.owner}.forward: state has shape {tuple(state.shape)}; expected [B, {self.d_state}]"
            )
        if state.dtype is torch.float32 and state.device == device:
            x = state  # [B, d_state], the common case: no conversion to dispatch
        else:
            x = state.to(device=device, dtype=torch.promote_types(state.dtype, torch.float32))  # [B, d_state]
        if self.norm is not None:
            x = self.norm(x)
        return self.hidden(x)  # [B, d_hidden[-1]]

    def check_stored(self, state: Mapping[str, Any], action: Mapping[str, Any], role: str, where: Where) -> None:
        """A frame's store-time check of stacked rows (``entmachin.frame.store_checks``):
        ``state['state']``, when dense, is ``[N, d_state]``.

        Args:
            state: the ``N`` stacked state rows, as stored.
            action: the ``N`` stacked action rows (``{"action": ...}``); only subclasses read them.
            role: ``"actor"`` or ``"critic"``, for messages.
            where: names a stored value in messages (``Where``; ``StoredRowsCheck`` in
                ``entmachin.frame.store_checks`` describes it).

        Raises:
            ValueError: the rows have another width.
        """
        value = state.get("state")
        if isinstance(value, (torch.Tensor, np.ndarray)) and tuple(value.shape[1:]) != (self.d_state,):
            raise ValueError(f"{where('state', _STATE)} has shape {tuple(value.shape[1:])} per row; the {role} "
                             f"({type(self).__name__}) takes d_state={self.d_state} features")


def _check_stored_choices(model: nn.Module, n_actions: int, action: Mapping[str, Any], where: Where) -> None:
    """Dense stored choices ``action['action']`` (``[N]`` or ``[N, k]``) are integers in ``[0, n_actions)``."""
    chosen = action.get("action")
    if not isinstance(chosen, (torch.Tensor, np.ndarray)) or chosen.ndim == 0:
        return
    values = chosen.detach().cpu().numpy() if isinstance(chosen, torch.Tensor) else chosen
    values = values.reshape(values.shape[0], -1)  # [N, k]
    bad = ~((values >= 0) & (values < n_actions) & (values == np.round(values))).all(axis=1)  # [N]
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{where('action', _ACTION, row=r)} is {values[r].tolist()}; {type(model).__name__} chooses "
                         f"among [0, {n_actions})")


class MLPActor(_DenseTrunk):
    """A categorical policy over ``n_actions`` choices.

    Args:
        d_state: width of the observation vector.
        n_actions: number of choices.
        d_hidden: widths of the hidden layers.
        activation: hidden activation.
        normalize_inputs: normalise observations with running statistics.
        clip: clip value of the input normalisation.

    Shape:
        state: ``[B, d_state]``; mask: bool ``[B, n_actions]``; returns ``action`` int64 ``[B, 1]``,
        ``log_prob`` ``[B, 1]`` and ``entropy`` ``[B, 1]``.
    """

    def __init__(self, d_state: int, n_actions: int, *, d_hidden: Sequence[int] = (64, 64),
                 activation: Activation = "tanh", normalize_inputs: bool = False, clip: float = 5.0) -> None:
        super().__init__("MLPActor", d_state, d_hidden, activation, normalize_inputs, clip)
        if isinstance(n_actions, bool) or not isinstance(n_actions, int) or n_actions < 1:
            raise ValueError(f"MLPActor: n_actions must be a positive int, got {n_actions!r}")
        self.n_actions = n_actions
        self.logits = _layer(self.d_out, n_actions, 0.01)

    def forward(self, state: Any, action: Optional[torch.Tensor] = None, mask: Optional[torch.Tensor] = None,
                *, deterministic: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Chooses one of ``n_actions`` per row (or scores the given choices).

        Args:
            state: float ``[B, d_state]`` (a tensor, or anything ``torch.as_tensor`` takes).
            action: choices to score instead of choosing, integers ``[B]`` or ``[B, 1]`` (floats holding whole
                numbers are accepted, as buffers often store them).
            mask: bool ``[B, n_actions]``, True where a choice is allowed; None: every choice is.
            deterministic: choose each row's most likely allowed choice instead of sampling.

        Returns:
            ``(action, log_prob, entropy)``: int64 ``[B, 1]``, ``[B, 1]`` and ``[B, 1]``.

        Raises:
            ValueError: a ``state`` or ``mask`` of the wrong shape, a mask row that forbids every choice, or an
                ``action`` of the wrong shape or dtype or outside ``[0, n_actions)``.
            TypeError: a ``state`` that is not a tensor and cannot be made one.
        """
        logits = self.logits(self.features(state))  # [B, n_actions]
        n = logits.shape[0]
        if mask is not None:
            mask = torch.as_tensor(mask, device=logits.device).to(torch.bool)
            if mask.shape != logits.shape:
                raise ValueError(
                    f"MLPActor.forward: mask has shape {tuple(mask.shape)}; expected [B, n_actions] = "
                    f"{(n, self.n_actions)}"
                )
            empty = ~mask.any(dim=1)  # [B]
            if empty.any():
                raise ValueError(f"MLPActor.forward: mask row {int(torch.nonzero(empty)[0, 0])} forbids every choice")
        if action is not None:
            if type(action) is not torch.Tensor or action.device != logits.device:
                action = torch.as_tensor(action, device=logits.device)
            if action.dtype.is_floating_point and (action == action.round()).all():
                action = action.long()  # buffers often store discrete actions as floats
            if action.numel() != n or action.dtype.is_floating_point or action.dtype == torch.bool:
                raise ValueError(
                    f"MLPActor.forward: action has shape {tuple(action.shape)} and dtype {action.dtype}; "
                    f"expected {n} integer choices ([B] or [B, 1])"
                )
            action = action.reshape(n) if action.dtype == torch.int64 else action.reshape(n).long()  # [B]
            if n:
                low, high = torch.stack(torch.aminmax(action)).tolist()  # one host sync for both bounds
                if low < 0 or high >= self.n_actions:
                    bad = (action < 0) | (action >= self.n_actions)  # [B]
                    raise ValueError(
                        f"MLPActor.forward: action {int(action[bad][0])} is outside [0, {self.n_actions})")
        return tuple(masked_categorical(logits, mask, action, deterministic, keepdim=True))  # [B, 1] each

    def check_stored(self, state: Mapping[str, Any], action: Mapping[str, Any], role: str, where: Where) -> None:
        """A frame's store-time check (``entmachin.frame.store_checks``) of the stacked rows ``state`` and
        ``action``: ``state['state']`` is ``[N, d_state]`` and the stored choices ``action['action']`` lie in
        ``[0, n_actions)``; ``role`` (``"actor"`` or ``"critic"``) and ``where`` (which names a stored value) word
        the ``ValueError``."""
        super().check_stored(state, action, role, where)
        _check_stored_choices(self, self.n_actions, action, where)


class MLPGaussianActor(_DenseTrunk):
    """A diagonal Gaussian policy over ``d_action`` continuous values (state-independent std).

    Args:
        d_state: width of the observation vector.
        d_action: number of continuous values per action.
        d_hidden: widths of the hidden layers.
        activation: hidden activation.
        normalize_inputs: normalise observations with running statistics.
        clip: clip value of the input normalisation.
        log_std_init: the initial log standard deviation of every value (a learnt parameter).

    Raises:
        ValueError: a width that is not a positive int, or an unknown activation.

    Shape:
        state: ``[B, d_state]``; returns ``action`` ``[B, d_action]``, ``log_prob`` ``[B, 1]``
        (summed over action dimensions) and ``entropy`` ``[B, 1]``.
    """

    def __init__(self, d_state: int, d_action: int, *, d_hidden: Sequence[int] = (64, 64),
                 activation: Activation = "tanh", normalize_inputs: bool = False, clip: float = 5.0,
                 log_std_init: float = 0.0) -> None:
        super().__init__("MLPGaussianActor", d_state, d_hidden, activation, normalize_inputs, clip)
        if isinstance(d_action, bool) or not isinstance(d_action, int) or d_action < 1:
            raise ValueError(f"MLPGaussianActor: d_action must be a positive int, got {d_action!r}")
        self.d_action = d_action
        self.mean = _layer(self.d_out, d_action, 0.01)
        self.log_std = nn.Parameter(torch.full((d_action,), float(log_std_init)))  # [d_action]

    def forward(self, state: Any, action: Optional[torch.Tensor] = None, *,
                deterministic: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Samples an action per row (or scores the given ones).

        Args:
            state: float ``[B, d_state]``.
            action: float ``[B, d_action]`` values to score instead of sampling.
            deterministic: the Gaussian's mean instead of a sample.

        Returns:
            ``(action, log_prob, entropy)``: ``[B, d_action]``, ``[B, 1]`` and ``[B, 1]``.

        Raises:
            ValueError: a ``state`` or ``action`` of the wrong shape.
        """
        mean = self.mean(self.features(state)).float()  # [B, d_action]
        dist = torch.distributions.Normal(mean, self.log_std.float().exp().expand_as(mean))
        if action is None:
            action = mean.detach() if deterministic else dist.sample()  # [B, d_action]
        else:
            action = torch.as_tensor(action, device=mean.device, dtype=mean.dtype)
            if action.shape != mean.shape:
                raise ValueError(
                    f"MLPGaussianActor.forward: action has shape {tuple(action.shape)}; expected {tuple(mean.shape)}"
                )
        log_prob = dist.log_prob(action).sum(dim=1, keepdim=True)  # [B, 1]
        entropy = dist.entropy().sum(dim=1, keepdim=True)  # [B, 1]
        return action, log_prob, entropy


class MLPCritic(_DenseTrunk):
    """A state-value function.

    Args:
        d_state: width of the observation vector.
        d_hidden: widths of the hidden layers.
        activation: hidden activation.
        normalize_inputs: normalise observations with running statistics.
        clip: clip value of the input normalisation.

    Raises:
        ValueError: a width that is not a positive int, or an unknown activation.

    Shape:
        state: ``[B, d_state]``; returns ``[B, 1]``.
    """

    def __init__(self, d_state: int, *, d_hidden: Sequence[int] = (64, 64), activation: Activation = "tanh",
                 normalize_inputs: bool = False, clip: float = 5.0) -> None:
        super().__init__("MLPCritic", d_state, d_hidden, activation, normalize_inputs, clip)
        self.value = _layer(self.d_out, 1, 1.0)

    def forward(self, state: Any) -> torch.Tensor:
        """The value of each row of ``state`` (float ``[B, d_state]``): ``[B, 1]``."""
        return self.value(self.features(state))  # [B, 1]
