"""docs/guides/tensorboard.md: the run directory and the tags are what the page says they are."""
import pathlib

from test.docs._pages import DOCS, blocks

PAGE = "guides/tensorboard.md"

# The tags of the page's table that a one-player PPO run writes (Count: entity types Player and Bean,
# a categorical action `count`).
PPO_TAGS = ["charts/episodic_return", "charts/episodic_length", "charts/SPS", "charts/learning_rate",
            "charts/minibatches", "charts/skipped_steps", "losses/policy_loss", "losses/value_loss", "losses/entropy",
            "losses/approx_kl", "losses/clipfrac", "losses/explained_variance", "entities/Player", "entities/Bean",
            "actions/count/0", "eval/mean_return", "hparams/final_mean_return"]


def test_the_run_directory_holds_what_the_listing_names(page):
    run_dir = pathlib.Path(page(PAGE)["__directory__"]) / "runs" / "count"
    listing = blocks(DOCS / PAGE, "text")[0]
    for name in ("config.yaml", "events.out.tfevents.*", "checkpoints/", "eval.json", "curve.png"):
        assert name in listing
        assert list(run_dir.glob(name.rstrip("/"))), name
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # the curves, and the HPARAMS tab's
    assert list(run_dir.glob("checkpoints/checkpoint_1024.json"))


def test_the_run_wrote_the_tags_of_the_table(page):
    ns = page(PAGE)
    assert set(PPO_TAGS) <= set(ns["tags"])
    page_text = (DOCS / PAGE).read_text(encoding="utf-8")
    for tag in PPO_TAGS:  # named in full, or as the last part of a row's family (`value_loss`, `entities/<type>`)
        families = {"entities": "`entities/<type>`", "actions": "`actions/<action>/<choice>`"}
        family = families.get(tag.split("/")[0], "\0")
        assert f"`{tag}`" in page_text or f"`{tag.split('/')[-1]}`" in page_text or family in page_text, tag


def test_the_evaluations_read_back_are_eval_json(page):
    ns = page(PAGE)
    evaluations = ns["evaluations"]
    assert [e["env_steps"] for e in evaluations] == [512, 1024] and [e["final"] for e in evaluations] == [False, True]
    assert set(evaluations[0]) == {"env_steps", "mean", "min", "max", "episodes", "final"}
    assert [step for step, _ in ns["returns"]] == [512, 1024]
    assert [round(v, 5) for _, v in ns["returns"]] == [round(e["mean"], 5) for e in evaluations]
