"""Transitions and replay buffers for dense and ragged (entity) data.

* ``Transition`` / ``TransitionBase``: major, sub and custom attributes, one or more rows.
* ``Buffer``: a ring buffer stored column by column; ``sample_batch`` concatenates dense
  leaves along dim 0 and ragged leaves into ``RaggedTensor``s.
* ``RolloutBuffer``: the on-policy frames' ``Buffer``, which keeps their rollout by reference.
* ``PrioritizedBuffer``: proportional prioritized replay over a vectorised ``SumTree``.
* ``save`` / ``load`` on both buffers.
"""

from entmachin.buffer.buffer import Buffer
from entmachin.buffer.prioritized import PrioritizedBuffer
from entmachin.buffer.rollout_buffer import RolloutBuffer
from entmachin.buffer.schema import LeafSpec, Schema
from entmachin.buffer.sum_tree import SumTree
from entmachin.buffer.transition import Transition, TransitionBase

__all__ = ["Buffer", "LeafSpec", "PrioritizedBuffer", "RolloutBuffer", "Schema", "SumTree", "Transition", "TransitionBase"]
