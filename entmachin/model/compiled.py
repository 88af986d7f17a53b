"""RogueNet's per-token arithmetic compiled with ``torch.compile`` (``RogueNetConfig(compile=True)``).

What is compiled: the pure tensor functions below (:data:`KERNELS`), each a stretch of a forward
between two places where the batch's structure matters: an entity type's embedding after its
projection (ReLU -> LayerNorm), each block's LayerNorm -> qkv projection, each
block's output projection -> residual -> LayerNorm -> MLP -> residual, and a categorical head's
masked log-softmax and entropy. Each is compiled once with dynamic sizes (inductor: C++ on CPUs,
Triton on GPUs), so one graph serves every batch whatever its token count (dynamo specialises
sizes 0 and 1 only). What stays eager: the ragged bookkeeping, the bucketed attention itself
(its structure changes with every batch), dropout, and every sampling step, so a seeded run draws
the same random numbers compiled or not.

Parameters are passed to the kernels as arguments: the modules, their ``state_dict`` and so
every checkpoint are the same whether a network runs compiled or not, and one network switches
with :func:`set_compiled`.

Where compiling fails (no C++ compiler, a device inductor does not support, an operation it
rejects), :func:`compile_problem` says why before anything runs, and a kernel whose compilation
fails warns once (:class:`CompileWarning`, naming the cause) and runs eagerly from then on; a
forward never fails because of the compiler.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CompileWarning", "Kernel", "KERNELS", "compile_problem", "set_compiled", "is_compiled", "recompiles",
           "check_compiler"]


class CompileWarning(UserWarning):
    """A part of RogueNet that was to run compiled runs eagerly; the message says why."""


def _cause(error: BaseException) -> str:
    """The first line of an error, as a warning names it (torch's compiler errors run long)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


class Kernel:
    """A pure function of tensors that runs compiled where asked and where the compiler works.

    ``kernel(compiled, *args)`` is ``fn(*args)``; with ``compiled``, through ``torch.compile(fn,
    dynamic=True)``. The first failure to compile (or to run what was compiled) warns once and
    sends every later call to ``fn``.
    """

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.fn = fn
        self._compiled: Optional[Callable[..., Any]] = None
        self.failed: Optional[str] = None

    def __call__(self, compiled: bool, *args: Any) -> Any:
        if not compiled or self.failed is not None:
            return self.fn(*args)
        try:
            if self._compiled is None:
                self._compiled = torch.compile(self.fn, dynamic=True)
            return self._compiled(*args)
        except Exception as e:  # noqa: BLE001 - any compiler failure falls back to the eager path
            self.fail(_cause(e))
            return self.fn(*args)

    def fail(self, cause: str) -> None:
        """Runs this kernel eagerly from now on, after one warning naming ``cause``."""
        if self.failed is None:
            self.failed = cause
            warnings.warn(f"RogueNet: compiling {self.name} failed ({cause}); it runs eagerly", CompileWarning,
                          stacklevel=3)

    def reset(self) -> None:
        """Forgets the compiled function and any failure (tests; a changed compiler)."""
        self._compiled, self.failed = None, None


def _embed(h: torch.Tensor, ln_w: torch.Tensor, ln_b: torch.Tensor, eps: float) -> torch.Tensor:
    """An entity type's projected features ``[n, d_model]`` -> ReLU -> LayerNorm (the projection
    itself stays outside: its width differs by type, and one graph serves every type this way)."""
    return F.layer_norm(F.relu(h), (h.shape[-1],), ln_w, ln_b, eps)


def _block_in(x: torch.Tensor, ln_w: torch.Tensor, ln_b: torch.Tensor, eps: float, w: torch.Tensor,
              b: torch.Tensor) -> torch.Tensor:
    """``[n_tokens, d_model]`` -> ``[n_tokens, 3 * d_model]``: LayerNorm -> qkv projection."""
    return F.linear(F.layer_norm(x, (x.shape[-1],), ln_w, ln_b, eps), w, b)


def _block_out(x: torch.Tensor, y: torch.Tensor, proj_w: torch.Tensor, proj_b: torch.Tensor, ln_w: torch.Tensor,
               ln_b: torch.Tensor, eps: float, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
               b2: torch.Tensor) -> torch.Tensor:
    """The residual stream ``x`` and the attention's output ``y`` (``[n_tokens, d_model]`` each) ->
    ``x + proj(y)``, then ``+ mlp(ln(.))`` (GELU, exact)."""
    x = x + F.linear(y, proj_w, proj_b)
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b, eps)
    return x + F.linear(F.gelu(F.linear(h, w1, b1)), w2, b2)


def _masked_log_softmax(logits: torch.Tensor, forbidden: Optional[torch.Tensor]
                        ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 logits ``[n, n_choices]`` (and the forbidden choices) -> log-probabilities, probabilities
    and each row's entropy ``[n, 1]`` (forbidden choices: -inf, 0, and no share of the entropy)."""
    if forbidden is not None:
        logits = logits.masked_fill(forbidden, float("-inf"))
    log_p = logits.log_softmax(-1)  # [n, n_choices]
    p = log_p.exp()  # [n, n_choices]
    # Zero out forbidden entries before the product: 0 * -inf would poison values and gradients.
    finite = log_p if forbidden is None else log_p.masked_fill(forbidden, 0.0)  # [n, n_choices]
    return log_p, p, -(p * finite).sum(dim=-1, keepdim=True)


EMBED = Kernel("the entity embedding", _embed)
BLOCK_IN = Kernel("a block's input projection", _block_in)
BLOCK_OUT = Kernel("a block's output and MLP", _block_out)
MASKED_LOG_SOFTMAX = Kernel("a categorical head", _masked_log_softmax)
KERNELS: Tuple[Kernel, ...] = (EMBED, BLOCK_IN, BLOCK_OUT, MASKED_LOG_SOFTMAX)


def set_compiled(module: nn.Module, compiled: bool) -> None:
    """Runs every part of ``module`` that has a compiled path (an attribute ``compiled``) compiled or eagerly.

    The weights, and so every checkpoint, are the same either way.
    """
    for m in module.modules():
        if isinstance(getattr(m, "compiled", None), bool):
            m.compiled = compiled
        if hasattr(m, "_compiler_checked"):  # a RogueNet asks compile_problem again before its next forward
            m._compiler_checked = None


def is_compiled(module: nn.Module) -> bool:
    """Whether any part of ``module`` runs compiled."""
    return any(getattr(m, "compiled", False) is True for m in module.modules())


_PROBLEMS: Dict[str, Optional[str]] = {}
_PROBE_GRAPHS = [0]  # graphs the probes compiled (recompiles leaves them out)


def compile_problem(device: Any = "cpu") -> Optional[str]:
    """Why RogueNet cannot run compiled on ``device`` (None: it can), found by compiling a small
    function forward and backward there; the answer is kept per device type.

    The probe's cost (seconds) is paid once per process and device type.
    """
    device = torch.device(device)
    if device.type not in _PROBLEMS:
        _PROBLEMS[device.type] = _probe(device)
    return _PROBLEMS[device.type]


def _probe(device: torch.device) -> Optional[str]:
    if device.type not in ("cpu", "cuda"):
        return f"torch.compile's inductor backend does not run on {device.type} devices here"
    if device.type == "cuda" and not torch.cuda.is_available():
        return "CUDA is not available"
    try:
        with torch.inference_mode(False), torch.enable_grad():  # the first forward may be an act under no_grad
            fn = torch.compile(lambda x, w: F.gelu(x @ w).sum(), dynamic=True)
            x = torch.randn(5, 3, device=device)
            w = torch.randn(3, 2, device=device, requires_grad=True)
            fn(x, w).backward()
        _PROBE_GRAPHS[0] += 1
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        return _cause(e)
    return None


def recompiles() -> int:
    """Graphs dynamo compiled in this process beyond one per kernel that compiled (its counters):
    a new graph for a kernel means a batch its guards did not cover (a new dtype or device, a
    size of 0 or 1, or gradients switched on or off)."""
    from torch._dynamo.utils import counters

    used = sum(k._compiled is not None and k.failed is None for k in KERNELS)
    return max(0, int(counters["stats"]["unique_graphs"]) - used - _PROBE_GRAPHS[0])


def check_compiler(net: nn.Module, device: torch.device) -> None:
    """Before a RogueNet's first forward on a device type: a network set to run compiled where the compiler
    cannot work there warns once, naming why, and runs eagerly."""
    problem = compile_problem(device) if is_compiled(net) else None
    if problem is not None:
        warnings.warn(f"RogueNet: cannot compile on {device.type} ({problem}); running eagerly", CompileWarning,
                      stacklevel=4)
        set_compiled(net, False)
    net._compiler_checked = device.type
