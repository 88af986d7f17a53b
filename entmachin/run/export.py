"""``entmachin export``: a trained acting network as one ONNX graph that runs without torch.

``export_policy`` writes a frame's acting network (or a network) to a file; ``export_run`` a run
directory's checkpoint. The graph, and its inputs and outputs, are ``entmachin.run.export_graph``'s.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from torch import nn

import entmachin
from entmachin.deploy import FORMAT
from entmachin.env.spaces import spaces_record
from entmachin.export_checksum import with_checksum
from entmachin.files import atomic_write
from entmachin.model.continuous import ContinuousHead
from entmachin.model.dense import DenseNet
from entmachin.model.memory import entity_memory_size
from entmachin.model.mlp import MLPActor
from entmachin.model.q_mlp import MLPQNet
from entmachin.model.rogue_net import RogueNet
from entmachin.model.wrappers import unwrap
from entmachin.run.export_dense import dense_graph, dense_net_graph
from entmachin.run.export_graph import RogueNetGraph
from entmachin.run.export_ops import inverse_cdf_sample

__all__ = ["FORMAT", "ExportError", "ExportResult", "export_policy", "export_run", "inverse_cdf_sample"]


class ExportError(ValueError):
    """A model (or a run) the exporter cannot express; the message says what is missing."""


@dataclass(frozen=True)
class ExportResult:
    """Where an export went: the file, its size in bytes, the seconds it took, and its kind."""

    path: str
    size: int
    seconds: float
    kind: str


def _acting_model(model: Any) -> Tuple[nn.Module, str]:
    """The network a frame acts with (or the given network) and the kind of graph it becomes."""
    from entmachin.frame.dqn import DQN  # a frame layer name, for frames given directly

    if isinstance(model, DQN):
        model = unwrap(model.qnet)
        if isinstance(model, RogueNet):
            return model, "rogue-net q"
    elif hasattr(model, "actor") and isinstance(unwrap(model.actor), nn.Module):
        model = unwrap(model.actor)
    model = unwrap(model)
    if isinstance(model, RogueNet):
        return model, "rogue-net policy"
    if isinstance(model, DenseNet):
        return model, "dense-net policy"
    if isinstance(model, MLPQNet):
        return model, "mlp q"
    if isinstance(model, MLPActor):
        return model, "mlp policy"
    raise ExportError(f"export: cannot express a {type(model).__name__} in ONNX; the exporter writes RogueNet "
                      "(policy or Q-heads), DenseNet (model.kind: mlp), MLPActor and MLPQNet")


def export_policy(model: Any, path: str, *, q_values: Optional[bool] = None,
                  metadata: Optional[Mapping[str, Any]] = None) -> ExportResult:
    """Writes a frame's acting network (or a network) to ``path`` as one ONNX graph.

    Args:
        model: a ``PPO`` / ``A2C`` / ``BC`` frame (its actor), a ``DQN`` frame (its Q-network), a
            ``RogueNet``, a ``DenseNet`` (``model.kind: mlp``), an ``MLPActor`` or an ``MLPQNet``.
        path: the ``.onnx`` file to write (atomically: a temporary file renamed into place).
        q_values: for a RogueNet with Q-heads, export the Q-heads (default: when it has them and
            was given through a DQN frame, or has Q-heads only).
        metadata: more ``str -> JSON`` entries for the file's metadata (e.g. the run's steps).

    Returns:
        the file, its size and the seconds the export took.

    Raises:
        ExportError: a model the exporter cannot express, or onnx is not installed.
    """
    started = time.perf_counter()
    net, kind = _acting_model(model)
    if kind == "rogue-net policy" and q_values:
        if net.q_head is None:
            raise ExportError("export: q_values=True, but the RogueNet has no Q-heads")
        kind = "rogue-net q"
    try:
        from entmachin.run.onnx_graph import Graph  # imports onnx: only when exporting
    except ImportError as e:
        raise ExportError(f"export needs the onnx package ({e}): pip install 'entmachin[export]'") from None

    g = Graph()
    if kind.startswith(("rogue-net", "dense-net")):
        if kind.startswith("rogue-net"):
            RogueNetGraph(g, net, q=kind.endswith("q")).build()
        else:
            dense_net_graph(g, net)
        props: Dict[str, Any] = {"spaces": spaces_record(net.obs_space, net.action_space)}
        continuous = {name: head.distribution for name, head in zip(net.action_names, net.heads)
                      if isinstance(head, ContinuousHead)}
        if continuous:  # how deploy samples each continuous action from its parameters
            props["continuous"] = continuous
        core = getattr(net, "memory", None)
        if core is not None:  # the state deploy keeps per game (entmachin.run.export_memory)
            props["memory"] = {"kind": core.kind, "size": core.size, "state_size": core.state_size}
        if entity_memory_size(net):  # the state deploy keeps per entity id
            props["entity_memory"] = {"state_size": entity_memory_size(net)}
    else:
        props = {"dense": dense_graph(g, net)}
    props.update({"format": FORMAT, "version": entmachin.__version__, "kind": kind})
    props.update(metadata or {})
    text = {f"entmachin.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in props.items()}
    onnx_model = g.model("entmachin_policy", text)
    atomic_write(path, with_checksum(onnx_model.SerializeToString()))
    return ExportResult(path, os.path.getsize(path), time.perf_counter() - started, kind)


def export_run(path: str, out: Optional[str] = None, version: Union[int, str, None] = None) -> ExportResult:
    """``entmachin export``: a run directory's checkpoint (the latest, or ``version``: its
    environment steps, or ``"best"``: its best checkpoint) to ``out`` (default: ``RUN_DIR/policy.onnx``).

    Raises:
        RunError: not a run directory, or no checkpoint (of that version), or no best checkpoint.
        ExportError: a model the exporter cannot express.
    """
    from entmachin.run.evaluation import checkpoint_version, eval_settings, load_trained, run_dir_of

    run_dir = run_dir_of(path)
    directory, steps = checkpoint_version(path, version)  # refuses a run without (that) checkpoint
    frame, config, _ = load_trained(path, version=version)
    metadata = {"env": config.env.name, "env_steps": steps, "frame": config.frame.name,
                "evaluation": eval_settings(config)}  # OnnxPolicy.evaluate's defaults
    if os.path.basename(directory) == "best":
        metadata["checkpoint"] = "best"
    return export_policy(frame, out or os.path.join(run_dir, "policy.onnx"), metadata=metadata)

