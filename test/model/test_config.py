"""Validation of RogueNetConfig, RelposEncodingConfig and TranslationConfig."""
import pytest

from entmachin.model.config import RelposEncodingConfig, RogueNetConfig, TranslationConfig


def test_defaults():
    c = RogueNetConfig()
    assert (c.d_model, c.n_layer, c.n_head, c.d_qk, c.pooling) == (32, 2, 2, 16, None)
    assert c.embd_pdrop == c.resid_pdrop == c.attn_pdrop == 0.0


def test_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        RogueNetConfig(64)  # type: ignore[misc]
    with pytest.raises(Exception):
        RogueNetConfig().d_model = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(d_model=0), r"RogueNetConfig.d_model: expected a positive int, got 0"),
        (dict(n_head=3), r"n_head=3 must divide d_model=32"),
        (dict(n_layer=-1), r"RogueNetConfig.n_layer: expected an int >= 0, got -1"),
        (dict(attn_pdrop=1.0), r"RogueNetConfig.attn_pdrop: expected a probability in \[0, 1\), got 1.0"),
        (dict(pooling="sum"), r"RogueNetConfig.pooling: expected None or one of .*got 'sum'"),
        (dict(input_clip=0.0), r"RogueNetConfig.input_clip: expected a positive number"),
        (
            dict(pooling="mean", relpos_encoding=RelposEncodingConfig(extent=[2], position_features=["x"])),
            r"pooling replaces attention",
        ),
    ],
)
def test_rogue_net_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RogueNetConfig(**kwargs)


def test_sub_config_type_error():
    with pytest.raises(TypeError, match=r"RogueNetConfig.translation: expected a TranslationConfig or None, got dict"):
        RogueNetConfig(translation={"reference_entity": "A"})


def test_from_dict_builds_sub_configs_and_names_unknown_keys():
    c = RogueNetConfig.from_dict(
        {"d_model": 16, "relpos_encoding": {"extent": [3, 3], "position_features": ["x", "y"]}}
    )
    assert c.relpos_encoding == RelposEncodingConfig(extent=(3, 3), position_features=("x", "y"))
    assert c.relpos_encoding.n_cells == 49
    with pytest.raises(ValueError, match=r"model.d_modle: unknown key; allowed keys are \['d_model'"):
        RogueNetConfig.from_dict({"d_modle": 3}, where="model")
    with pytest.raises(ValueError, match=r"RogueNetConfig.translation.origin: unknown key"):
        RogueNetConfig.from_dict({"translation": {"origin": "A"}})
    with pytest.raises(TypeError, match=r"RogueNetConfig: expected a mapping, got list"):
        RogueNetConfig.from_dict([])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(extent=[1], position_features=["x", "y"]), r"extent has 1 values but position_features has 2"),
        (dict(extent=[0], position_features=["x"]), r"RelposEncodingConfig.extent\[0\]: expected a positive int, got 0"),
        (dict(extent=[], position_features=[]), r"expected at least one feature name"),
        (dict(extent=[1], position_features=["x"], scale=0), r"RelposEncodingConfig.scale: expected a positive number"),
    ],
)
def test_relpos_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RelposEncodingConfig(**kwargs)


def test_relpos_feature_names_must_be_a_list():
    with pytest.raises(TypeError, match=r"RelposEncodingConfig.position_features: expected a list of feature names"):
        RelposEncodingConfig(extent=[1], position_features="x")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(position_features=[]), r"TranslationConfig.position_features: expected at least one"),
        (dict(rotation_vec_features=["c"]), r"rotation_vec_features: expected two names \(cos, sin\), got \['c'\]"),
        (
            dict(rotation_vec_features=["c", "s"], rotation_angle_feature="a"),
            r"give at most one of rotation_vec_features and rotation_angle_feature",
        ),
        (dict(position_features=["x"], rotation_angle_feature="a"), r"rotation needs exactly two position features"),
    ],
)
def test_translation_config_errors(kwargs, match):
    args = dict(reference_entity="A", position_features=["x", "y"])
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        TranslationConfig(**args)
