"""Frames: ``safe_call`` (named, device-aware model calls), GAE, the A2C / PPO / DQN algorithms and behaviour cloning.

Example:
    >>> ppo = PPO(net, net.critic(), torch.optim.Adam, torch.nn.MSELoss(reduction="sum"))
    >>> collector = RolloutCollector(ppo, EnvList(MineSweeper, 16, seed=0), n_steps=64)
    >>> for _ in range(100):
    ...     collector.collect()          # act -> env.act -> store_rollout
    ...     ppo.update()
"""
from entmachin.frame.a2c import A2C
from entmachin.frame.checkpoint import CheckpointError
from entmachin.frame.bc import BC
from entmachin.frame.config import A2CConfig, BCConfig, PPOConfig
from entmachin.frame.dqn import DQN, DQNPer
from entmachin.frame.config import DQNConfig, DQNPerConfig
from entmachin.frame.evaluate import EvalResult, evaluate
from entmachin.frame.gae import GAEResult, gae, gae_episode
from entmachin.frame.stepping import NonFiniteUpdateError
from entmachin.frame.ppo import PPO
from entmachin.frame.collector import RolloutCollector, RolloutStats, global_actions, global_state
from entmachin.frame.safe_call import model_devices, safe_call
from entmachin.frame.summary import UpdateStats

__all__ = [
    "A2C", "A2CConfig", "BC", "BCConfig", "CheckpointError", "DQN", "DQNConfig", "DQNPer", "DQNPerConfig", "EvalResult", "GAEResult", "NonFiniteUpdateError", "PPO", "PPOConfig",
    "RolloutCollector", "RolloutStats", "UpdateStats", "evaluate", "gae", "gae_episode", "global_actions",
    "global_state", "model_devices", "safe_call",
]
