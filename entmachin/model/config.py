"""Configuration records of RogueNet: the network, relative positions and translation.

All three are keyword-only frozen dataclasses validated in ``__post_init__``; checks that need
the observation space (feature names, entity types) run when ``RogueNet`` is built.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Mapping, Optional, Sequence, Tuple

from entmachin.settings import documented, setting

Pooling = Literal["mean", "max", "meanmax"]
POOLINGS: Tuple[str, ...] = ("mean", "max", "meanmax")
Continuous = Literal["beta", "squashed_gaussian"]
CONTINUOUS: Tuple[str, ...] = ("beta", "squashed_gaussian")
MEMORY_KINDS: Tuple[str, ...] = ("gru", "lstm")


def _names(value: Sequence[str], where: str) -> Tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{where}: expected a list of feature names, got {value!r}")
    return tuple(value)


def _positive_int(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: expected a positive int, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class RelposEncodingConfig:
    """Relative positional encoding on a grid of named position features.

    Each attention logit gets ``q . key_table[cell]`` and each attention output gets
    ``sum_t att[s, t] * value_table[cell]``, where ``cell`` is the grid cell of the relative
    position ``(pos[t] - pos[s]) / scale``, each coordinate rounded and clamped to
    ``[-extent[i], extent[i]]``. Entity types without every position feature (and the
    ``__global__`` token) share one extra "no position" cell.

    Attributes:
        extent: per position feature, the largest relative offset with its own cell.
        position_features: names of the position features, e.g. ``("x", "y")``.
        scale: relative positions are divided by it before bucketing.
        per_entity_values: one value table per entity type of the attended entity.
    """

    extent: Tuple[int, ...]
    position_features: Tuple[str, ...]
    scale: float = 1.0
    per_entity_values: bool = False

    def __post_init__(self) -> None:
        names = _names(self.position_features, "RelposEncodingConfig.position_features")
        object.__setattr__(self, "position_features", names)
        object.__setattr__(self, "extent", tuple(self.extent))
        if not self.position_features:
            raise ValueError("RelposEncodingConfig.position_features: expected at least one feature name, got none")
        if len(self.extent) != len(self.position_features):
            raise ValueError(
                f"RelposEncodingConfig: extent has {len(self.extent)} values but position_features has "
                f"{len(self.position_features)}; give one extent per position feature"
            )
        for i, e in enumerate(self.extent):
            _positive_int(e, f"RelposEncodingConfig.extent[{i}]")
        if not self.scale > 0:
            raise ValueError(f"RelposEncodingConfig.scale: expected a positive number, got {self.scale!r}")

    @property
    def n_cells(self) -> int:
        """Number of grid cells, ``prod(2 * extent + 1)`` (without the "no position" cell)."""
        n = 1
        for e in self.extent:
            n *= 2 * e + 1
        return n


@dataclass(frozen=True, kw_only=True)
class TranslationConfig:
    """Moves every row's positions so that its reference entity sits at the origin.

    The first entity of ``reference_entity`` in a row is the reference; rows without one keep
    their positions. Only entity types that have every position feature are moved.

    Attributes:
        reference_entity: entity type of the reference.
        position_features: names of the position features.
        rotation_vec_features: two features of the reference (a unit direction ``(cos, sin)``)
            by which all positions are rotated so that the reference faces along ``+x``.
        rotation_angle_feature: alternative to ``rotation_vec_features``: the reference's
            heading in radians.
        add_dist_feature: append each moved entity's distance to the reference as a feature.
    """

    reference_entity: str
    position_features: Tuple[str, ...]
    rotation_vec_features: Optional[Tuple[str, str]] = None
    rotation_angle_feature: Optional[str] = None
    add_dist_feature: bool = False

    def __post_init__(self) -> None:
        names = _names(self.position_features, "TranslationConfig.position_features")
        object.__setattr__(self, "position_features", names)
        if not self.position_features:
            raise ValueError("TranslationConfig.position_features: expected at least one feature name, got none")
        if self.rotation_vec_features is not None:
            vec = _names(self.rotation_vec_features, "TranslationConfig.rotation_vec_features")
            if len(vec) != 2:
                raise ValueError(
                    f"TranslationConfig.rotation_vec_features: expected two names (cos, sin), got {list(vec)}"
                )
            object.__setattr__(self, "rotation_vec_features", vec)
        if self.rotation_vec_features is not None and self.rotation_angle_feature is not None:
            raise ValueError(
                "TranslationConfig: give at most one of rotation_vec_features and rotation_angle_feature, got both"
            )
        rotates = self.rotation_vec_features is not None or self.rotation_angle_feature is not None
        if rotates and len(self.position_features) != 2:
            raise ValueError(
                f"TranslationConfig: rotation needs exactly two position features, got {list(self.position_features)}"
            )


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """A recurrent core after RogueNet's trunk (``entmachin.model.memory``).

    Attributes:
        kind: ``gru`` or ``lstm``.
        size: the width of the recurrent state (an LSTM carries two of them, ``h`` and ``c``).
        per_entity: also keep one state per entity id (``EntityMemoryCore``), alongside the row's.
    """

    kind: Literal["gru", "lstm"] = "gru"
    size: int = 64
    per_entity: bool = False

    def __post_init__(self) -> None:
        if self.kind not in MEMORY_KINDS:
            raise ValueError(f"MemoryConfig.kind: expected one of {list(MEMORY_KINDS)}, got {self.kind!r}")
        _positive_int(self.size, "MemoryConfig.size")
        if not isinstance(self.per_entity, bool):
            raise TypeError(f"MemoryConfig.per_entity: expected a bool, got {self.per_entity!r}")


@documented
@dataclass(frozen=True, kw_only=True)
class RogueNetConfig:
    """Hyperparameters of RogueNet."""

    d_model: int = setting(32, "width of the entity embeddings and the residual stream")
    n_layer: int = setting(2, "transformer blocks")
    n_head: int = setting(2, "attention heads (must divide d_model)")
    d_qk: int = setting(16, "query/key width of select-entity heads")
    embd_pdrop: float = setting(0.0, "dropout on the embeddings")
    resid_pdrop: float = setting(0.0, "dropout on each residual branch")
    attn_pdrop: float = setting(0.0, "dropout on the attention weights")
    pooling: Optional[Pooling] = setting(
        None, "null: attention; mean / max / meanmax: pool each observation's entities instead")
    relpos_encoding: Optional[RelposEncodingConfig] = setting(
        None, "relative-position attention, e.g. {extent: [5, 5], position_features: [x, y]}")
    translation: Optional[TranslationConfig] = setting(
        None, "move positions so a reference entity sits at the origin, e.g. {reference_entity: Player, "
              "position_features: [x, y]}")
    input_clip: float = setting(5.0, "normalised inputs are clipped to [-input_clip, input_clip]")
    continuous: Continuous = setting(
        "squashed_gaussian", "distribution of continuous actions within their bounds: squashed_gaussian or beta")
    memory: Optional[MemoryConfig] = setting(
        None, "a recurrent state carried from step to step of each game row, e.g. {kind: gru, size: 64}; "
              "null: none (a feed-forward policy). Trained over sequences of frame.sequence_length steps",
        before=None)
    compile: bool = setting(
        False, "run the per-token arithmetic compiled with torch.compile (entmachin.model.compiled); the weights, "
               "and so checkpoints, are the same either way")

    COMPILE_VALUES: ClassVar[Tuple[Any, ...]] = (True, False)  # a run config's model section adds "auto"

    def __post_init__(self) -> None:
        if not any(self.compile is v or (isinstance(v, str) and self.compile == v) for v in self.COMPILE_VALUES):
            raise TypeError(f"{type(self).__name__}.compile: expected one of {list(self.COMPILE_VALUES)}, "
                            f"got {self.compile!r}")
        if self.continuous not in CONTINUOUS:
            raise ValueError(f"RogueNetConfig.continuous: expected one of {list(CONTINUOUS)}, got {self.continuous!r}")
        for name in ("d_model", "n_head", "d_qk"):
            _positive_int(getattr(self, name), f"RogueNetConfig.{name}")
        if isinstance(self.n_layer, bool) or not isinstance(self.n_layer, int) or self.n_layer < 0:
            raise ValueError(f"RogueNetConfig.n_layer: expected an int >= 0, got {self.n_layer!r}")
        if self.d_model % self.n_head:
            raise ValueError(
                f"RogueNetConfig: n_head={self.n_head} must divide d_model={self.d_model}"
            )
        for name in ("embd_pdrop", "resid_pdrop", "attn_pdrop"):
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                raise ValueError(f"RogueNetConfig.{name}: expected a probability in [0, 1), got {p!r}")
        if self.pooling is not None and self.pooling not in POOLINGS:
            raise ValueError(f"RogueNetConfig.pooling: expected None or one of {list(POOLINGS)}, got {self.pooling!r}")
        if self.pooling is not None and self.relpos_encoding is not None:
            raise ValueError(
                "RogueNetConfig: relpos_encoding acts on attention, but pooling replaces attention; "
                "set one of them to None"
            )
        if not self.input_clip > 0:
            raise ValueError(f"RogueNetConfig.input_clip: expected a positive number, got {self.input_clip!r}")
        for name, cls in (("relpos_encoding", RelposEncodingConfig), ("translation", TranslationConfig),
                          ("memory", MemoryConfig)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, cls):
                raise TypeError(
                    f"RogueNetConfig.{name}: expected a {cls.__name__} or None, got {type(value).__name__}; "
                    "RogueNetConfig.from_dict builds it from a mapping"
                )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "RogueNetConfig") -> "RogueNetConfig":
        """Builds a config from a (YAML-loaded) mapping; nested mappings become sub-configs.

        Args:
            values: field name -> value; ``relpos_encoding``, ``translation`` and ``memory`` may be mappings.
            where: the dotted path messages start with.

        Raises:
            ValueError: an unknown key, named by its dotted path with the allowed keys.
            TypeError: ``values`` is not a mapping, or a nested entry is neither a mapping, its config nor None.
        """
        values = dict(_check_keys(cls, values, where))
        for name, sub in (("relpos_encoding", RelposEncodingConfig), ("translation", TranslationConfig),
                          ("memory", MemoryConfig)):
            if isinstance(values.get(name), Mapping):
                values[name] = sub(**_check_keys(sub, values[name], f"{where}.{name}"))
        return cls(**values)


def _check_keys(cls: type, values: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    if not isinstance(values, Mapping):
        raise TypeError(f"{where}: expected a mapping, got {type(values).__name__}")
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key; allowed keys are {allowed}")
    return values
