"""The statistic a run's tool reports comes from its manifest (recipe.yaml only for runs older than the field),
per run: runs that disagree are said to, in both languages, and none is picked silently."""
import yaml

from iolab.engine import store
from iolab.report import i18n, notebooks

import pandas as pd


def _run(data, name, *, statistic=None, recipe_yaml=None, label=None):
    """A run directory as the runner writes it (``statistic`` None: a run older than the manifest field)."""
    fields = {"statistic": statistic} if statistic else {}
    run = store.Run.create(data, recipe="quick", label=label or name, host="h", **fields)
    if recipe_yaml is not None:
        run.write("recipe.yaml", yaml.safe_dump(recipe_yaml))
    return run


def _results(runs, reps):
    return pd.DataFrame([{"run_id": r.run_id, "test": "SEQ1M-Q8T1", "direction": "read", "rep": rep, "bw_mbps": 1.0}
                         for r in runs for rep in range(1, reps + 1)])


def test_the_manifest_says_the_statistic_and_recipe_yaml_only_for_old_runs(tmp_path):
    new = _run(tmp_path, "new", statistic="mean", recipe_yaml={"name": "quick", "statistic": "best"})
    old = _run(tmp_path, "old", recipe_yaml={"name": "quick", "statistic": "median"})
    bare = _run(tmp_path, "bare")
    assert notebooks.recipe_statistic(new.path) == "mean"  # the manifest wins over the recipe file
    assert notebooks.recipe_statistic(old.path) == "median"
    assert notebooks.recipe_statistic(bare.path) is None
    sel = notebooks.select(tmp_path)
    by_run = notebooks.run_statistics(sel.manifests)
    assert by_run.to_dict() == {new.run_id: "mean", old.run_id: "median", bare.run_id: None}


def test_runs_that_agree_give_the_tools_statistic_and_its_best_of_first(tmp_path):
    runs = [_run(tmp_path, "a", statistic="best"), _run(tmp_path, "b", statistic="best")]
    sel = notebooks.select(tmp_path)
    assert notebooks.tool_statistic(sel.manifests) == ("best", "")
    choice = notebooks.statistic_choice(_results(runs, 3), sel.manifests, "mean")
    assert (choice.shown, choice.tool, choice.passes, choice.note) == ("best", "best", 3, "")
    # one pass: no best-of table, the report's statistic
    assert notebooks.statistic_choice(_results(runs, 1), sel.manifests, "mean").shown == "mean"


def test_runs_that_disagree_are_said_to_not_settled_by_the_first(tmp_path):
    runs = [_run(tmp_path, "cdm-box", statistic="best"), _run(tmp_path, "kdm-box", statistic="mean"),
            _run(tmp_path, "old-box", recipe_yaml={"name": "quick", "statistic": "best"})]
    sel = notebooks.select(tmp_path)
    for lang in ("en", "ja"):
        tool, note = notebooks.tool_statistic(sel.manifests, lang)
        assert tool is None and note == i18n.text("statistic.disagree", lang, each=i18n.join(
            [i18n.text("statistic.each", lang, statistic=i18n.label("best", lang, section="cdm_notes_statistics"),
                       systems=i18n.join(["cdm-box", "old-box"], lang)),
             i18n.text("statistic.each", lang, statistic=i18n.label("mean", lang, section="cdm_notes_statistics"),
                       systems="kdm-box")], lang))
        assert "cdm-box" in note and "kdm-box" in note and "old-box" in note
        choice = notebooks.statistic_choice(_results(runs, 3), sel.manifests, "median", lang)
        assert (choice.shown, choice.tool, choice.note) == ("median", None, note)
