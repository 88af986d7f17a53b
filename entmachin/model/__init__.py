"""Models: RogueNet (a ragged transformer over entities) and MLPs for dense problems."""
from entmachin.model.config import RelposEncodingConfig, RogueNetConfig, TranslationConfig
from entmachin.model.dense import DenseNet, DenseNetCritic
from entmachin.model.input_norm import InputNorm, collecting_stats
from entmachin.model.mlp import MLPActor, MLPCritic, MLPGaussianActor
from entmachin.model.q_mlp import MLPQNet
from entmachin.model.rogue_net import RogueNet, RogueNetCritic, RogueNetOutput

__all__ = [
    "DenseNet",
    "DenseNetCritic",
    "InputNorm",
    "MLPActor",
    "MLPCritic",
    "MLPGaussianActor",
    "MLPQNet",
    "RelposEncodingConfig",
    "RogueNet",
    "RogueNetConfig",
    "RogueNetCritic",
    "RogueNetOutput",
    "TranslationConfig",
    "collecting_stats",
]
