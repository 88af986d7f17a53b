"""guides/tune.md: the page's tune: section loads and its space passes the checks; the small study refused a
misspelt key before any trial, ran its trials as run directories, and wrote a best.yaml that loads."""
import yaml

from entmachin.run.config import config_from_dict
from test.docs._pages import DOCS, blocks

PAGE = "guides/tune.md"


def test_the_pages_tune_section_loads_and_its_space_is_searchable():
    from entmachin.run.tune.space import check_space

    (section,) = [b for b in blocks(DOCS / PAGE, "yaml") if b.startswith("tune:")]
    config = config_from_dict(yaml.safe_load(section))
    assert config.tune.trials == 30 and config.tune.pruner == "median"
    assert [d.key for d in check_space(config)] == ["frame.actor_learning_rate", "frame.n_epochs", "frame.batch_size"]


def test_a_misspelt_key_is_refused_before_any_trial(page):
    ns = page(PAGE)
    assert ns["refused"].startswith("tune.space.frame.actor_lerning_rate: not a key of this config")
    assert "frame.actor_learning_rate" in ns["refused"]


def test_the_study_ran_its_trials_and_wrote_its_report(page):
    ns = page(PAGE)
    study = ns["__directory__"] / "study"
    assert len(list(study.glob("trial-*"))) == 3
    assert "3 finished" in ns["lines"][0]
    for name in ("best.yaml", "history.png", "importances.png", "study.db"):
        assert (study / name).is_file(), name
    best = config_from_dict(yaml.safe_load((study / "best.yaml").read_text()))
    assert best.env.name == "MultiArmedBandit"
