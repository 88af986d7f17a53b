"""The per-call overhead of ``safe_call`` against calling the model directly.

Usage: ``python benchmarks/bench_safe_call.py [--calls 500] [--repeats 21] [--threads 1] [--device cpu|cuda]``

``safe_call`` runs for every ``act`` and every minibatch, so what it adds to a call matters
most for small models. Each case calls the same model with the same tensors, once directly
(``model(state)``) and once through ``safe_call`` with Machin-style dicts that also hold keys
the model ignores; both under ``torch.no_grad()``. Calls of the two alternate in blocks so that
machine load hits both alike; the figure per case is the best block's microseconds per call.

Cases: a module with the tiny MLP's parameters and a forward that does nothing (safe_call's
own cost, free of the forward's timing noise); a tiny MLP (4-16-16-2, Machin's CartPole actor)
for one row (acting) and a 256-row minibatch; entmachin's ``MLPActor`` re-evaluating actions
(two dicts); a 40-layer stack (the device check walks every parameter at every call); a nested
state dict of 8 tensors.

Figures on a shared 2-core machine vary by tens of microseconds between runs; the no-op row is
the steadiest measure of what ``safe_call`` itself adds. ``--device cuda`` puts the models and
their tensors on the card (each block then ends with ``torch.cuda.synchronize()``).
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, List, Tuple

import torch
from _device import add_device_argument, checked_device, clock, describe
from torch import nn

from entmachin.frame import safe_call
from entmachin.model import MLPActor


class TinyMLP(nn.Module):
    def __init__(self, d_in: int = 4, d_hidden: int = 16, d_out: int = 2, n_hidden: int = 2) -> None:
        super().__init__()
        layers: List[nn.Module] = [nn.Linear(d_in, d_hidden), nn.ReLU()]
        for _ in range(n_hidden - 1):
            layers += [nn.Linear(d_hidden, d_hidden), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(d_hidden, d_out))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.net(state), dim=-1)  # [B, d_out]


class Identity(TinyMLP):
    """The tiny MLP's parameters with a forward that does nothing: isolates safe_call's cost."""

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return state


class NestedInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = TinyMLP()

    def forward(self, entities: Dict[str, Any]) -> torch.Tensor:
        return self.net(entities["a"]["x0"])  # [B, 2]


def _best_us(fn: Callable[[], Any], calls: int, now: Callable[[], float]) -> float:
    start = now()
    for _ in range(calls):
        fn()
    return (now() - start) / calls * 1e6


def measure(direct: Callable[[], Any], wrapped: Callable[[], Any], calls: int, repeats: int,
            now: Callable[[], float]) -> Tuple[float, float]:
    direct(), wrapped()  # warm-up: the signature is read on the first call
    best_direct = best_wrapped = float("inf")
    for _ in range(repeats):
        best_direct = min(best_direct, _best_us(direct, calls, now))
        best_wrapped = min(best_wrapped, _best_us(wrapped, calls, now))
    return best_direct, best_wrapped


def cases(device: torch.device) -> Dict[str, Tuple[Callable[[], Any], Callable[[], Any]]]:
    tiny = TinyMLP().to(device)
    one = torch.randn(1, 4, device=device)  # [1, 4]
    batch = torch.randn(256, 4, device=device)  # [256, 4]
    reward = torch.zeros(256, 1, device=device)  # [256, 1]
    actor = MLPActor(4, 2, d_hidden=(16, 16)).to(device)
    action = torch.randint(0, 2, (256, 1), device=device)  # [256, 1]
    deep = TinyMLP(n_hidden=40).to(device)
    nested = NestedInput().to(device)
    entities = {"a": {f"x{i}": torch.randn(8, 4, device=device) for i in range(4)},  # [8, 4] each
                "b": {f"y{i}": torch.randn(8, 4, device=device) for i in range(4)}}
    identity = Identity().to(device)
    return {
        "no-op forward, tiny MLP's parameters": (
            lambda: identity(one), lambda: safe_call(identity, {"state": one})
        ),
        "tiny MLP, 1 row (act)": (lambda: tiny(one), lambda: safe_call(tiny, {"state": one})),
        "tiny MLP, 256 rows": (
            lambda: tiny(batch), lambda: safe_call(tiny, {"state": batch, "reward": reward, "terminal": reward})
        ),
        "MLPActor eval, 256 rows, 2 dicts": (
            lambda: actor(batch, action), lambda: safe_call(actor, {"state": batch}, {"action": action})
        ),
        "40-layer MLP, 1 row": (lambda: deep(one), lambda: safe_call(deep, {"state": one})),
        "nested dict of 8 tensors": (
            lambda: nested(entities), lambda: safe_call(nested, {"entities": entities, "extra": one})
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1)
    add_device_argument(parser)
    args = parser.parse_args()
    device = checked_device(args.device)
    torch.set_num_threads(args.threads)
    print(f"safe_call overhead, best of {args.repeats} x {args.calls} calls, torch {torch.__version__}, "
          f"{describe(device)}, {args.threads} thread(s)")
    print(f"{'case':38s} {'direct us':>10s} {'safe_call us':>13s} {'overhead us':>12s} {'ratio':>7s}")
    with torch.no_grad():
        for name, (direct, wrapped) in cases(device).items():
            d, w = measure(direct, wrapped, args.calls, args.repeats, clock(device))
            print(f"{name:38s} {d:10.2f} {w:13.2f} {w - d:12.2f} {w / d:7.2f}x")


if __name__ == "__main__":
    main()
