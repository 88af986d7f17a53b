"""Tensorboard glue for frames: per-update scalars and the autograd graph of a loss.

Every ``update()`` writes the finite fields of its :class:`UpdateStats` (:class:`QUpdateStats` for DQN / DQNPer) at
step = the number of updates so far (or the update's ``log_step``), under the tags their ``Attributes`` name
(``_TAGS`` maps them); a field without a tag is not logged.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, NamedTuple, Optional, Set, Tuple, Union

import torch

__all__ = ["UpdateStats", "QUpdateStats", "make_writer", "log_update", "autograd_dot", "write_graph"]


class UpdateStats(NamedTuple):
    """What one ``update()`` measured; losses are means over the minibatches that ran (nan: none).

    Attributes:
        policy_loss: (``losses/policy_loss``) the negated surrogate plus the entropy term.
        value_loss: (``losses/value_loss``) the criterion x ``value_weight``.
        entropy: (``losses/entropy``) the mean entropy of the policy over actors (or rows).
        approx_kl: (``losses/approx_kl``) the mean of ``(r - 1) - log r``, ``r`` the probability ratio.
        clip_fraction: (``losses/clipfrac``) share of actors (or rows) whose ratio left ``[1 - clip, 1 + clip]``
            (PPO).
        explained_variance: (``losses/explained_variance``) ``1 - Var(return - value) / Var(return)`` over the
            stored rows (1: all; nan: constant returns).
        learning_rate: (``charts/learning_rate``) the learning rate of the first parameter group of the first
            optimizer.
        skipped_steps: (``charts/skipped_steps``) optimizer steps skipped for non-finite losses or gradients.
        minibatches: (``charts/minibatches``) minibatches evaluated (fewer than asked when ``target_kl`` stopped
            the update early).
        stopped_early: whether ``target_kl`` stopped the update before a minibatch (not logged).
        optimizer_steps: ``"actor"`` / ``"critic"`` / ``"shared"`` -> steps ``(attempted, skipped)`` (not logged).
        non_finite: what made steps skip: ``"policy loss"``, ``"entropy"``, ``"value loss"``, ``"gradients of
            ..."`` (not logged).
    """

    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float
    clip_fraction: float
    explained_variance: float
    learning_rate: float
    skipped_steps: int
    minibatches: int
    stopped_early: bool
    optimizer_steps: Dict[str, Tuple[int, int]]
    non_finite: Tuple[str, ...]


class QUpdateStats(NamedTuple):
    """What one DQN / DQNPer ``update()`` measured (``importance_weight``: nan without prioritized replay).

    Attributes:
        td_loss: (``losses/td_loss``) the loss of the TD errors (importance-weighted for DQNPer).
        q_values: (``charts/q_values``) mean ``Q(s, a)`` of the sampled rows.
        epsilon: (``charts/epsilon``) the exploration rate after the update.
        buffer_size: (``charts/buffer_size``) rows in the replay buffer.
        importance_weight: (``charts/importance_weight``) mean importance weight of the sampled rows (DQNPer).
        learning_rate: (``charts/learning_rate``) as in :class:`UpdateStats`.
        skipped_steps: (``charts/skipped_steps``) steps skipped for non-finite TD errors, loss or gradients.
    """

    td_loss: float
    q_values: float
    epsilon: float
    buffer_size: int
    importance_weight: float
    learning_rate: float
    skipped_steps: int = 0


def make_writer(writer: Any, where: str) -> Optional[Any]:
    """Returns a ``SummaryWriter`` for a log dir (str / path), the writer given, or None.

    Raises:
        TypeError: ``writer`` is neither None, a path, nor an object with ``add_scalar``.
    """
    if isinstance(writer, (str, os.PathLike)):
        from torch.utils.tensorboard import SummaryWriter  # imported only when asked for: slow
        return SummaryWriter(log_dir=os.fspath(writer))
    if writer is not None and not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(f"{where}: writer must be None, a log directory or a SummaryWriter (anything with add_scalar), "
                        f"got {type(writer).__name__}")
    return writer


_TAGS = {  # field -> tag, in the order they are written
    "policy_loss": "losses/policy_loss", "value_loss": "losses/value_loss", "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl", "clip_fraction": "losses/clipfrac",
    "explained_variance": "losses/explained_variance", "learning_rate": "charts/learning_rate",
    "skipped_steps": "charts/skipped_steps", "minibatches": "charts/minibatches",
    "td_loss": "losses/td_loss", "q_values": "charts/q_values", "epsilon": "charts/epsilon",
    "buffer_size": "charts/buffer_size", "importance_weight": "charts/importance_weight",
}


def log_update(writer: Any, stats: Union[UpdateStats, QUpdateStats], step: int) -> None:
    """Writes the finite fields of ``stats`` under the module's tags."""
    values: Dict[str, Any] = stats._asdict()
    for field, tag in _TAGS.items():
        if field in values and math.isfinite(value := float(values[field])):
            writer.add_scalar(tag, value, step)


def autograd_dot(tensor: torch.Tensor, name: str) -> str:
    """The backward graph that produced ``tensor`` in Graphviz DOT text (no graphviz needed)."""
    lines = [f"digraph {name!r} {{".replace("'", '"'), '  node [shape=box, fontsize=10];']
    seen: Set[int] = set()
    stack = [tensor.grad_fn] if tensor.grad_fn is not None else []
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        variable = getattr(fn, "variable", None)  # set on leaves: show the parameter's shape
        label = type(fn).__name__ if variable is None else f"{tuple(variable.shape)}"
        lines.append(f'  n{id(fn)} [label="{label}"];')
        for child, _ in fn.next_functions:
            if child is not None:
                lines.append(f"  n{id(child)} -> n{id(fn)};")
                stack.append(child)
    return "\n".join(lines + ["}"])


def write_graph(tensor: torch.Tensor, name: str, directory: str, writer: Optional[Any]) -> str:
    """Writes ``<directory>/<name>.dot`` (and the DOT text to tensorboard); returns the path."""
    dot = autograd_dot(tensor, name)
    os.makedirs(directory or ".", exist_ok=True)
    path = os.path.join(directory or ".", f"{name}.dot")
    with open(path, "w", encoding="utf-8") as f:
        f.write(dot)
    if writer is not None and callable(getattr(writer, "add_text", None)):
        writer.add_text(f"graph/{name}", "```\n" + dot + "\n```", 0)
    return path
