"""What RogueNet and DenseNet share around their inputs: trusted inputs and the critic view.

A frame checks every row once, when it is stored (``entmachin.frame.store_checks``); its update
then runs the networks inside ``trusted_inputs()``, which skips their second pass of value
checks. ``CriticView`` is a network's value path as a module of its own, sharing its weights.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Dict, Iterator, Mapping, Optional

import torch

from entmachin.model.input_norm import NormalisedModule

__all__ = ["TrustedInputs", "CriticView"]

# Per thread, id(net) -> depth of the net's open trusted_inputs() blocks (a net is in the dict
# only while a block holds it, so its id cannot be reused meanwhile).
_TRUSTED = threading.local()


def _trusted_depths() -> Dict[int, int]:
    depths = getattr(_TRUSTED, "depths", None)
    if depths is None:
        depths = _TRUSTED.depths = {}
    return depths


class TrustedInputs:
    """A network's :meth:`trusted_inputs` block (mixed into an ``nn.Module`` before it)."""

    #: Set on ``nn.DataParallel`` replicas only: whether the thread that made the replica was
    #: inside :meth:`trusted_inputs` (replicas run in worker threads of their own).
    _trusted_replica = False

    @contextlib.contextmanager
    def trusted_inputs(self) -> Iterator[Any]:
        """Within this block, this thread's calls of the network skip the value checks of inputs.

        For rows the caller has already checked (a frame's ``store_*`` checked every stored row;
        see ``entmachin.frame.store_checks``): ``forward``, ``forward_with_value``, ``q_values``,
        ``value`` and the critic view's ``forward`` then make no validation device sync.

        Skipped: the checks that read tensor values: features finite; ``__global__`` one item
        per row; per-row lengths of ``visible``, masks, ``actee_mask`` and given actions against
        the entities and actors; actor and actee indices within their row; every actor has an
        allowed choice; given actions in range and allowed by their masks.

        Still checked (what the shapes alone tell, needed to compute anything): the kinds of
        values, entity types and action names, feature and mask widths, dtypes, numbers of rows,
        and total numbers of mask rows and actions against the actors.

        Results on valid inputs are bit for bit those of the checked path. Passing inputs that
        the skipped checks would refuse is undefined: wrong results, an indexing error, or a
        device-side assertion on an accelerator.

        The block nests (re-entrant) and ends on exceptions. It is per thread: other threads'
        calls of the same network are checked as usual; ``nn.DataParallel`` replicas made inside
        the block (in this thread) are trusted in their worker threads. The critic view
        (:meth:`critic`) shares the network's state: its ``trusted_inputs()`` is this one.

        Example:
            >>> with net.trusted_inputs():
            ...     out, value = net.forward_with_value(stored["entities"], stored["action_masks"],
            ...                                         action=stored_action)
        """
        depths = _trusted_depths()
        key = id(self)
        depths[key] = depths.get(key, 0) + 1
        try:
            yield self
        finally:
            if depths[key] == 1:
                del depths[key]
            else:
                depths[key] -= 1

    def inputs_trusted(self) -> bool:
        """Whether calls in this thread now skip the value checks (see :meth:`trusted_inputs`)."""
        return self._trusted_replica or id(self) in _trusted_depths()

    def _replicate_for_data_parallel(self) -> Any:
        # nn.DataParallel replicates in the caller's thread and runs replicas in worker threads:
        # the replica carries the caller's trust with it.
        replica = super()._replicate_for_data_parallel()  # type: ignore[misc]
        replica._trusted_replica = self.inputs_trusted()
        return replica


class CriticView(NormalisedModule):
    """The value path of a network (``network``'s class) as a module of its own, sharing its
    weights, state and trust.

    Shape:
        returns ``[B, 1]``.
    """

    network: type = torch.nn.Module  # the class of network a subclass views

    def __init__(self, net: Any) -> None:
        super().__init__()
        if not isinstance(net, self.network):
            raise TypeError(f"{type(self).__name__}: expected a {self.network.__name__}, got {type(net).__name__}")
        self.net = net

    @property
    def shared_actor(self) -> Any:
        """The network this critic is a view of; frames evaluate both in one pass through its
        ``forward_with_value``."""
        return self.net

    def trusted_inputs(self) -> "contextlib.AbstractContextManager[Any]":
        """The network's ``trusted_inputs()``: the view shares its network's state."""
        return self.net.trusted_inputs()

    def inputs_trusted(self) -> bool:
        """The network's ``inputs_trusted()``."""
        return self.net.inputs_trusted()

    def forward(self, entities: Mapping[str, Any], visible: Optional[Mapping[str, Any]] = None) -> torch.Tensor:
        return self.net.value(entities, visible)
