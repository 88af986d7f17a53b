"""PPO: A2C with the clipped surrogate objective (Machin 0.4.2's ``PPO`` keywords).

Example, RogueNet on an entity environment, sharing the trunk between actor and critic::

    net = RogueNet(envs.obs_space(), envs.action_space())
    ppo = PPO(net, net.critic(), torch.optim.Adam, nn.MSELoss(), batch_size=256,
              actor_update_times=32, critic_update_times=32, entropy_weight=-0.01, gae_lambda=0.95)
    collector = RolloutCollector(ppo, envs, n_steps=64)
    for _ in range(100):
        collector.collect()       # act -> env.act -> store_rollout
        ppo.update()
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from entmachin.frame.a2c import A2C
from entmachin.frame.config import PPOConfig

__all__ = ["PPO"]


class PPO(A2C):
    """Proximal policy optimisation with a clipped surrogate objective.

    Every argument of :class:`A2C`, with the same meaning and default, plus
    ``surrogate_loss_clip``. The policy loss of a minibatch is
    ``-mean(min(r A, clip(r, 1 - c, 1 + c) A))`` over actors (or rows for dense actors), with
    ``r = exp(log_prob - old_log_prob)``; old log-probabilities are computed once per
    ``update()``, before its first step, in batched passes of the actor as it stands (no
    copy of the actor is made).
    """

    _config_cls = PPOConfig

    def _needs_old_log_probs(self) -> bool:
        return True

    def _policy_objective(self, log_prob: torch.Tensor, ratio: Optional[torch.Tensor], advantage: torch.Tensor
                          ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """PPO's clipped surrogate ``mean(min(r A, clip(r, 1 - c, 1 + c) A))`` over units (maximised),
        with ``c = surrogate_loss_clip``, and the share of units whose ratio left ``[1 - c, 1 + c]``.

        Shape:
            log_prob, ratio, advantage: ``[n_units]`` (PPO always has old log-probabilities).
        """
        clip = self.config.surrogate_loss_clip
        surrogate = torch.min(ratio * advantage, ratio.clamp(1.0 - clip, 1.0 + clip) * advantage).mean()
        with torch.no_grad():
            clip_fraction = ((ratio - 1.0).abs() > clip).to(log_prob.dtype).mean()
        return surrogate, clip_fraction
