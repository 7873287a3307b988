"""Imported runs keep their user's step axis: a real TRL run logged through HF Trainer's W&B,
trackio and TensorBoard callbacks lands on `train/global_step`, not on each tracker's own
counter; W&B's per-key step metrics (`define_metric`) hold; TensorBoard's `add_hparams` folder
is its run's config; text is a categorical key; media and histograms are left out and counted,
never stored as their fields; W&B's summary is the run config's `summary`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import LiveServer, ServerState
from tests.integrations.support import Catalog, get_json, runs
from tests.integrations.test_importers import (
    check_again_adds_nothing,
    check_run,
    check_values,
    import_,
    make_logs,
    needs,
    served,  # noqa: F401 - the fixture
)


def left_out(skipped: dict[str, int]) -> str:
    """The import's summary of what it left out, as the command prints it."""
    return "left out: " + ", ".join(f"{n} values ({why})" for why, n in sorted(skipped.items()))


def on_steps(truth: dict[str, dict[str, Any]]) -> dict[str, dict[int, Any]]:
    """{key: {step: value}} from {step: {key: value}}."""
    out: dict[str, dict[int, Any]] = {}
    for step, values in truth.items():
        for key, value in values.items():
            out.setdefault(key, {})[int(step)] = value
    return out


@needs("wandb", "trackio", "tensorboard", "trl")
def test_a_trl_run_imports_on_its_global_step_from_every_tracker(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:  # noqa: F811
    state, server = served
    truth = make_logs("trl", tmp_path)
    sources = {"wandb": (tmp_path / "wandb", "trl-grpo", 1e-12),
               "trackio": (tmp_path / "trackio" / "telescope-trl.db", "trl-grpo", 1e-12),
               "tensorboard": (tmp_path / "tb", "tb", 1e-6)}  # TensorBoard keeps float32
    for kind, (path, name, rel) in sources.items():
        done = import_(state, kind, str(path), "--project", kind)
        [run] = [r for r in runs(server, kind) if r["name"] == name]
        catalog = Catalog(server, run["id"])
        expected = on_steps(truth[kind])
        assert set(expected) <= catalog.step_keys(), kind
        check_values(catalog, expected, rel)
        # TRL's steps 1, 2, 3, 4: not the tracker's own counter (W&B's _step counts every
        # log call: 8, 18, 28...; trackio's too)
        assert sorted(catalog.values("step", "train/reward")) == [1, 2, 3, 4], kind
        assert run["last_step"] == 4
        assert "train/global_step" not in catalog.step_keys()  # the axis, not a metric
        assert not [k for k in catalog.step_keys() if k.startswith("completions")], kind
        if kind != "tensorboard":  # TRL's completions table: left out, counted
            assert "values (media (" in done.stdout and "table" in done.stdout, done.stdout
    wandb_run = next(r for r in runs(server, "wandb") if r["name"] == "trl-grpo")
    summary = get_json(server, f"/api/runs/{wandb_run['id']}")["config"]["summary"]
    assert {k: summary[k] for k in truth["summary"]} == truth["summary"]
    assert summary["train_runtime"] > 0  # HF's WandbCallback puts it in the summary only


@needs("wandb")
def test_wandb_step_metrics_hold_per_key_and_media_is_counted(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:  # noqa: F811
    state, server = served
    truth = make_logs("wandb_steps", tmp_path)
    done = import_(state, "wandb", str(tmp_path / "wandb"), "--project", "wb")
    run_truth = truth["wb-steps"]
    assert left_out(run_truth["skipped"]) in done.stdout
    check_run(server, "wb", "wb-steps", run_truth, rel=1e-12)  # summary in the config
    [run] = runs(server, "wb")
    catalog = Catalog(server, run["id"])
    assert not [k for k in catalog.step_keys() if k.split(".")[0] in
                ("samples", "weights", "completions")]  # never img.height and the like
    [outcome] = [e for e in catalog.raw["series"] if e["key"] == "train/outcome"]
    assert outcome.get("categorical") is True
    check_again_adds_nothing(state, server, "wb", ["wandb", str(tmp_path / "wandb")])


@needs("tensorboard")
def test_tensorboard_hparams_are_the_run_config_and_texts_are_categorical(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:  # noqa: F811
    state, server = served
    truth = make_logs("tensorboard_media", tmp_path)
    done = import_(state, "tensorboard", str(tmp_path / "tb"), "--project", "tb")
    assert left_out(truth["hf-run"]["skipped"]) in done.stdout
    names = {r["name"] for r in runs(server, "tb")}
    assert not [n for n in names if n.startswith("hf-run/")]  # no sub-run of its hparams
    for name, run_truth in truth.items():  # a sweep's two trials stay runs of their own
        check_run(server, "tb", name, run_truth, rel=1e-6)
    check_again_adds_nothing(state, server, "tb", ["tensorboard", str(tmp_path / "tb")])


@pytest.mark.parametrize("value", [{"_type": "histogram", "bins": [1, 2]},
                                   {"_type": "trackio.image", "file_path": "x.png"}])
def test_a_media_value_is_counted_by_its_type(value: dict[str, Any]) -> None:
    from ingest.importers.source import merge_rows

    skipped: dict[str, int] = {}
    rows = merge_rows([(1, None, {"m": value, "x": 1.0, "t": "text"})], skipped)
    assert rows == [(1, None, {"x": 1.0, "t": "text"})]
    assert list(skipped) == ["histogram" if "histogram" in value["_type"]
                             else "media (trackio.image)"]


def test_a_key_keeps_the_kind_of_its_first_value() -> None:
    """As the server keeps a key numeric or categorical from its first value on (in step
    order, whatever the order of the source's rows)."""
    from ingest.importers.source import merge_rows

    skipped: dict[str, int] = {}
    rows = merge_rows([(2, None, {"k": 1.0, "n": "z"}), (1, None, {"k": "x", "n": 1.0}),
                       (3, None, {"k": "y", "n": 2.0})], skipped)
    assert rows == [(1, None, {"k": "x", "n": 1.0}), (3, None, {"k": "y", "n": 2.0})]
    assert skipped == {"a number for a text key": 1, "text for a numeric key": 1}
