"""The commands `manage.py` and `telescope` share, defined once: what each does (its help) and
its options, for the management command (`add_arguments`) and the `telescope` sub-command
alike; the management command's `handle` is the one implementation both run.

Django-free (argparse only), so `telescope --help` and `telescope sync` need no Django. The
demo's options are here too: its data is `ingest.write.demo`, its command in telescope_ui
(it also makes a starter Custom view).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ingest.importers import READERS

DECLARE_RANGES = (
    "declare a run's environments (reward and sample-metric ranges) from the `environments:` "
    "list of YAML files: this product's entries or Telescope's run config as it is "
    "(docs/protocol.md, Environment declarations); the files' lists together replace the "
    "run's declarations, as a `ranges` message would, and the server re-aggregates")

IMPORT = (
    "import runs logged with TensorBoard (event files), trackio (a project's local database) "
    "or W&B (offline run folders): history scalars become step metrics, the config the run's "
    "config; importing the same run again adds nothing. Exits 1 when a run was not imported "
    "(a damaged file: named with where it is damaged, nothing of that run stored)")

DEMO = ("ingest a synthetic GRPO run (through the real ingest path) to look at, and give its "
        "project a starter Custom view")


def declare_ranges(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", required=True, help="the run's project")
    p.add_argument("--run", required=True,
                   help="the run's name (as the runs page shows it)")
    p.add_argument("--strict", action="store_true",
                   help="make an unknown key of an entry (a typo such as reward_minimum) an "
                   "error naming the key and its file, and declare nothing; without it, each "
                   "unknown key is named in a warning and ignored")
    p.add_argument("file", type=Path, nargs="+", metavar="FILE",
                   help="a YAML file with a top-level `environments:` list; with several, "
                   "their lists together (an environment in two files is refused)")


def import_runs(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", choices=sorted(READERS), help="the tool that logged the runs")
    p.add_argument("path", type=Path, help="TensorBoard log dir or event file; a trackio "
                   "project .db; a W&B offline-run folder or a folder of them")
    p.add_argument("--project", required=True, help="the Telescope project (created if "
                   "needed)")
    p.add_argument("--run", help="the Telescope run name (when PATH holds one run; default: "
                   "the run's own name)")


def demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", default="demo",
                   help="the project to put the run in (created if needed; default demo)")
    p.add_argument("--run", default="grpo-demo", help="the run's name (default grpo-demo)")
    p.add_argument("--steps", type=int, default=200,
                   help="how many training steps to make up (default 200)")
    p.add_argument("--if-empty", action="store_true",
                   help="do nothing when any run exists already (what `make run` uses)")


@dataclass(frozen=True)
class Shared:
    """A command of both: its `telescope` name, its management command, a line for the list
    of commands, its help, its options."""

    name: str
    command: str
    summary: str
    help: str
    add: Callable[[argparse.ArgumentParser], None]


SHARED = (
    Shared("declare-ranges", "declare_ranges", "declare a run's reward and metric ranges from "
           "YAML files", DECLARE_RANGES, declare_ranges),
    Shared("import", "import", "import TensorBoard, trackio or W&B offline runs", IMPORT,
           import_runs),
    Shared("demo", "demo", "ingest a synthetic GRPO run to look at", DEMO, demo),
)
