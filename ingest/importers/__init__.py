"""Bring runs logged with other tools into Telescope: `manage.py import KIND PATH --project P`.

A reader per tool finds the runs under PATH and reads each as a `SourceRun` of step rows and a
config (`tensorboard_events`, `trackio_db`, `wandb_offline`: each documents what it reads);
`load.import_run` sends them through the same validate → store path as a trainer's messages,
with stable message ids, so importing twice adds nothing.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ingest.importers.source import SourceRun

READERS = {
    "tensorboard": "ingest.importers.tensorboard_events",
    "trackio": "ingest.importers.trackio_db",
    "wandb": "ingest.importers.wandb_offline",
}


def find_runs(kind: str, path: Path) -> list[SourceRun]:
    """The runs of tool `kind` under `path` (nothing read yet but their names)."""
    if kind not in READERS:
        raise ValueError(f"unknown source {kind!r}; one of {sorted(READERS)}")
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    return importlib.import_module(READERS[kind]).find_runs(path)


__all__ = ["READERS", "SourceRun", "find_runs"]
