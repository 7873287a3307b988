"""`manage.py import tensorboard|trackio|wandb`: real files written by each tool
(`make_logs.py`: torch's SummaryWriter, trackio in a temporary TRACKIO_DIR, wandb offline),
imported into a live server's database while it serves, read back through the read API.

Every logged scalar must arrive at its step with its value, the config as the run's config,
the run's end as its status; importing again must add nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import ROOT, LiveServer, ServerState
from tests.integrations.support import Catalog, get_json, runs

MAKE_LOGS = Path(__file__).with_name("make_logs.py")


def needs(*modules: str) -> pytest.MarkDecorator:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"no {', '.join(missing)} to write the "
                              "tool's files: pip install -e '.[dev]' (or '.[import]')")


@pytest.fixture
def served(live_state: ServerState) -> Iterator[tuple[ServerState, LiveServer]]:
    server = LiveServer(live_state).start()
    yield live_state, server
    server.stop()


def make_logs(kind: str, out: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(MAKE_LOGS), kind, str(out)], capture_output=True,
                          text=True, timeout=180, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "truth.json").read_text())


def import_(state: ServerState, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), "import", *args],
                          env=state.env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert (done.returncode == 0) == ok, done.stdout + done.stderr[-3000:]
    return done


def check_run(server: LiveServer, project: str, name: str, truth: dict[str, Any],
              rel: float) -> None:
    """The run `name` holds every value of `truth` at its step, its config and its status."""
    [run] = [r for r in runs(server, project) if r["name"] == name]
    assert run["status"] == truth["status"]
    config = get_json(server, f"/api/runs/{run['id']}")["config"]
    assert config == {**truth["config"], "imported_from": config["imported_from"]}
    catalog = Catalog(server, run["id"])
    expected: dict[str, dict[int, float]] = {}
    for step, values in truth["steps"].items():
        for key, value in values.items():
            if value is not None:
                expected.setdefault(key, {})[int(step)] = value
    assert catalog.step_keys() == set(expected)
    check_values(catalog, expected, rel)
    assert run["last_step"] == max(int(s) for s in truth["steps"])


def check_values(catalog: Catalog, expected: dict[str, dict[int, Any]], rel: float) -> None:
    """Every key's points as expected: numbers within `rel`, text (a categorical key) equal."""
    for key, points in expected.items():
        stored = catalog.values("step", key)
        assert set(stored) == set(points), key  # a null (NaN) is no point
        for step, value in points.items():
            if isinstance(value, str):
                assert stored[step] == value, (key, step)
            else:
                assert stored[step] == pytest.approx(value, rel=rel, abs=1e-12), (key, step)


def check_again_adds_nothing(state: ServerState, server: LiveServer, project: str,
                             args: list[str]) -> None:
    before = {r["name"]: (r["id"], r["last_step"]) for r in runs(server, project)}
    catalogs = {name: Catalog(server, rid).raw for name, (rid, _) in before.items()}
    again = import_(state, *args, "--project", project)
    assert again.stdout.count("nothing new (imported before)") == len(before), again.stdout
    after = {r["name"]: (r["id"], r["last_step"]) for r in runs(server, project)}
    assert after == before
    assert {name: Catalog(server, rid).raw for name, (rid, _) in after.items()} == catalogs


@needs("tensorboard")
def test_it_imports_tensorboard_scalars_and_hparams(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:
    state, server = served
    truth = make_logs("tensorboard", tmp_path)
    done = import_(state, "tensorboard", str(tmp_path / "tb"), "--project", "tb")
    assert "steps/s" in done.stdout and "steps (100%)\n" in done.stderr  # progress, as plain
    assert "\r" not in done.stderr  # lines: stderr is a pipe here (ingest.management.progress)
    assert "left out" not in done.stdout  # the texts are categorical keys
    for name, run_truth in truth.items():  # one run per folder, named by its path
        check_run(server, "tb", name, run_truth, rel=1e-6)  # TensorBoard keeps float32
    check_again_adds_nothing(state, server, "tb", ["tensorboard", str(tmp_path / "tb")])


@needs("trackio")
def test_it_imports_a_trackio_project(served: tuple[ServerState, LiveServer],
                                      tmp_path: Path) -> None:
    state, server = served
    truth = make_logs("trackio", tmp_path)
    db = tmp_path / "trackio" / "telescope-import.db"
    done = import_(state, "trackio", str(db), "--project", "tr")
    assert done.stdout.count("Imported trackio run") == 2
    for name, run_truth in truth.items():
        check_run(server, "tr", name, run_truth, rel=1e-12)
    check_again_adds_nothing(state, server, "tr", ["trackio", str(db)])


@needs("wandb")
def test_it_imports_wandb_offline_runs(served: tuple[ServerState, LiveServer],
                                       tmp_path: Path) -> None:
    state, server = served
    truth = make_logs("wandb", tmp_path)
    folder = tmp_path / "wandb"
    refused = import_(state, "wandb", str(folder), "--project", "wb", "--run", "x", ok=False)
    assert "holds 2 runs" in refused.stderr and "--run names one run only" in refused.stderr
    assert runs(server, "wb") == []  # nothing imported
    done = import_(state, "wandb", str(folder), "--project", "wb")
    assert "left out" not in done.stdout  # the logged text is a categorical key
    for name, run_truth in truth.items():  # the crashed run (exit code 1) is failed
        check_run(server, "wb", name, run_truth, rel=1e-12)
    check_again_adds_nothing(state, server, "wb", ["wandb", str(folder)])
    # One offline-run folder may be imported under another name: a run of its own.
    [one] = sorted(folder.glob("offline-run-*"))[:1]
    import_(state, "wandb", str(one), "--project", "wb", "--run", "renamed")
    names = sorted(r["name"] for r in runs(server, "wb"))
    assert names == sorted([*truth, "renamed"])


@needs("wandb")
def test_it_reads_a_wandb_run_cut_short_up_to_its_last_whole_record(
        served: tuple[ServerState, LiveServer], tmp_path: Path) -> None:
    """A run killed mid-write leaves a torn last record and no exit record: the records
    before the cut are imported, and the run is not marked ended."""
    state, server = served
    truth = make_logs("wandb", tmp_path / "logs")
    [folder] = sorted((tmp_path / "logs" / "wandb").glob("offline-run-*"))[:1]
    [log] = folder.glob("*.wandb")
    cut = tmp_path / "cut" / folder.name
    cut.mkdir(parents=True)
    data = log.read_bytes()
    (cut / log.name).write_bytes(data[:len(data) * 2 // 3])
    done = import_(state, "wandb", str(cut), "--project", "torn")
    assert "Imported wandb run" in done.stdout
    assert f"warning: {(cut / log.name).resolve()}: ends inside the record at byte" \
        in done.stderr and "the run is not marked ended" in done.stderr  # not silent
    [run] = runs(server, "torn")
    full = truth[run["name"]]
    assert run["status"] == "running" and 0 < run["last_step"] < max(map(int, full["steps"]))
    loss = Catalog(server, run["id"]).values("step", "loss")
    assert loss == {int(k): v["loss"] for k, v in full["steps"].items()
                    if int(k) <= run["last_step"]}
