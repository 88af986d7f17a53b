"""rogue-net 0.1.9's side of ``bench_rogue_net.py``, run in rogue-net's own interpreter.

Started by ``bench_rogue_net.py --roguenet-worker`` (see that script's docstring for the venv).
It reads one JSON request per line on stdin and answers one JSON line on stdout, so that the
two sides can alternate step by step while each keeps its interpreter warm:

* at start it answers ``{"torch_scatter": "stub" | "real", ...}`` (which ``torch_scatter``
  was imported, versions, rogue-net's config defaults);
* ``{"op": "prepare", "workload": NAME}`` builds the network for that workload's spaces,
  reads its batches (``_ragged_batches``), runs untimed steps (the first fills the input
  statistics) and answers the tokens and actors rogue-net saw;
* ``{"op": "step"}`` answers ``{"seconds": s}`` for one timed step of the prepared workload
  (on CUDA, wall clock after synchronising, given as ``cpu_seconds`` too);
* ``{"op": "quit"}`` ends.

Nothing of entmachin is imported here where rogue-net's venv has what it needs. Where
ragged-buffer has no wheel (Python 3.12 and newer, as on the GPU machines), entmachin's
``ragged_buffer`` stand-in (``entmachin.ragged.shim``) takes its place, and numpy 2's missing
``np.bool8``, which entity-gym 0.1.10 names, is numpy's ``bool_``; the first answer says which.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from typing import Any, Dict, List, Optional


def _import_scatter(stub_dir: str) -> Dict[str, Any]:
    """Imports ``torch_scatter`` (the real package if installed, else the stub in ``stub_dir``)
    and wraps its ``scatter`` to count calls."""
    try:
        import torch_scatter
    except ImportError:
        sys.path.append(stub_dir)
        import torch_scatter
    kind = "stub" if (torch_scatter.__doc__ or "").startswith("Stand-in") else "real"
    calls = {"n": 0}
    scatter = torch_scatter.scatter

    def counting_scatter(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return scatter(*args, **kwargs)

    torch_scatter.scatter = counting_scatter
    return {"kind": kind, "path": os.path.dirname(torch_scatter.__file__),
            "version": getattr(torch_scatter, "__version__", "-"), "calls": calls}


def _ragged_buffer() -> str:
    """``"real"`` where ragged-buffer imports; otherwise installs entmachin's stand-in (this checkout's)
    and says so. Also gives numpy 2 the ``np.bool8`` alias entity-gym's annotations need."""
    import numpy as np

    if not hasattr(np, "bool8"):
        np.bool8 = np.bool_
    try:
        import ragged_buffer  # noqa: F401
        return "real"
    except ImportError:
        sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from entmachin.ragged import shim

        shim.install()
        return "entmachin's stand-in (entmachin.ragged.shim)"


class _Workload:
    """One workload's rogue-net network, batches and timed step."""

    def __init__(self, stem: str, seed: int, device: str = "cpu") -> None:
        import torch
        import entity_gym.env
        from _ragged_batches import build_spaces, load_workload
        from entity_gym.env import SelectEntityActionSpace, VecCategoricalActionMask, VecSelectEntityActionMask
        from entity_gym.simple_trace import Tracer
        from ragged_buffer import RaggedBufferBool, RaggedBufferF32, RaggedBufferI64
        from rogue_net.input_norm import InputNorm
        from rogue_net.rogue_net import RogueNet, RogueNetConfig

        spaces, self.mode, batches = load_workload(stem, (RaggedBufferF32, RaggedBufferI64, RaggedBufferBool))
        obs_space, action_space = build_spaces(spaces, entity_gym.env)
        torch.manual_seed(seed)
        config = RogueNetConfig(d_model=32, n_layer=2, n_head=2, d_qk=16)
        self.net = RogueNet(config, obs_space, action_space).to(device)  # it moves its inputs to its device
        self.norms = [m for m in self.net.modules() if isinstance(m, InputNorm)]
        self.tracer = Tracer(cuda=device == "cuda")
        self.batches: List[Dict[str, Any]] = []
        for batch in batches:
            masks = {}
            for name, m in batch["action_masks"].items():
                if isinstance(action_space[name], SelectEntityActionSpace):
                    # entmachin's all-True "actee_mask" has no counterpart in entity-gym 0.1.10.
                    masks[name] = VecSelectEntityActionMask(m["actors"], m["actees"])
                else:
                    masks[name] = VecCategoricalActionMask(m["actors"], m.get("mask"))
            self.batches.append({"entities": batch["entities"], "masks": masks, "action": batch.get("action")})
        self.tokens = 0
        self.net.backbone.register_forward_pre_hook(self._count_tokens)

    def _count_tokens(self, module: Any, inputs: Any) -> None:
        self.tokens += int(inputs[0].shape[0])

    def step(self) -> Dict[str, int]:
        """One pass over the batches; returns the actors per action rogue-net scored."""
        import torch

        actors: Dict[str, int] = {}
        for batch in self.batches:
            if self.mode == "train":
                self.net.zero_grad(set_to_none=True)
                _, log_prob, *_ = self.net.get_action_and_auxiliary(
                    batch["entities"], {}, batch["masks"], self.tracer, prev_actions=batch["action"])
                torch.stack([lp.sum() for lp in log_prob.values()]).sum().backward()
            else:
                # As enn-trainer's rollout: no_grad, sampling, input statistics updated (train mode).
                with torch.no_grad():
                    _, log_prob, *_ = self.net.get_action_and_auxiliary(
                        batch["entities"], {}, batch["masks"], self.tracer)
            for name, lp in log_prob.items():
                actors[name] = actors.get(name, 0) + int(lp.numel())
        return actors

    def prepare(self) -> Dict[str, Any]:
        """Untimed: one pass that fills the input statistics, then (train) freezes them, as
        entmachin's minibatch re-evaluation never updates its statistics; then two steps."""
        mode, self.mode = self.mode, "infer"
        self.step()  # statistics from the first batches, like entmachin's collecting_stats() pass
        self.mode = mode
        if mode == "train":
            for norm in self.norms:
                norm.freeze()
        self.step()  # warm-up (allocations)
        self.tokens = 0
        actors = self.step()
        return {"tokens": self.tokens, "actors": actors}


def serve(data_dir: str, stub_dir: str, threads: int, seed: int, device: str = "cpu") -> None:
    """Answers requests on stdin until ``quit`` or end of input."""
    reply_to = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not break the protocol
    import torch
    from _device import checked_device, wall_and_cpu

    torch.set_num_threads(threads)
    on = checked_device(device)
    scatter = _import_scatter(stub_dir)
    ragged = _ragged_buffer()
    import rogue_net.rogue_net as rn

    def answer(message: Dict[str, Any]) -> None:
        reply_to.write(json.dumps(message) + "\n")
        reply_to.flush()

    from importlib.metadata import version

    defaults = dataclasses.asdict(rn.RogueNetConfig())
    answer({"torch_scatter": scatter["kind"], "torch_scatter_path": scatter["path"],
            "torch_scatter_version": scatter["version"], "rogue_net": version("rogue-net"),
            "entity_gym": version("entity-gym"), "ragged_buffer": ragged, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "device": str(on),
            "defaults": {k: defaults[k] for k in ("d_model", "n_layer", "n_head", "d_qk")}})
    workload: Optional[_Workload] = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "quit":
                return
            if request["op"] == "prepare":
                workload = _Workload(os.path.join(data_dir, request["workload"]), seed, device)
                answer(workload.prepare())
            elif request["op"] == "step":
                if workload is None:
                    raise ValueError("step before prepare")
                seconds, cpu_seconds = wall_and_cpu(workload.step, on)
                answer({"seconds": seconds, "cpu_seconds": cpu_seconds, "scatter_calls": scatter["calls"]["n"]})
            else:
                raise ValueError(f"unknown op {request['op']!r}")
        except Exception:  # the driver shows it and stops
            answer({"error": traceback.format_exc()})
