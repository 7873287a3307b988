"""`telescope` is the whole toolbox (docs/protocol.md "Commands", issue 32): every sub-command
is listed by `telescope --help` and in docs/protocol.md (with the trainer client's
`telescope-sync`), every option of each (and of the management commands they share an
implementation with) has help text, `telescope token` takes PROJECT, --list [PROJECT] or
--revoke PREFIX, `telescope declare-ranges` declares a run's
ranges (`--strict` refuses an unknown key, naming it), long commands' progress is plain lines
when stderr is not a terminal and a bar redrawn in place when it is, and the pages name the
commands that exist in a pip install."""

from __future__ import annotations

import argparse
import io
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import load_command_class
from django.test import Client

from ingest.management import arguments
from ingest.management.progress import Progress
from telescope_ui.cli import parser

ROOT = Path(__file__).resolve().parents[2]
SUBCOMMANDS = ("serve", "token", "declare-ranges", "import", "demo", "manage", "sync")
# The management commands of this project (Django's own are Django's).
MANAGEMENT = {"ingest": ("createtoken", "tokens", "declare_ranges", "import", "materialize"),
              "telescope_ui": ("demo",)}


def telescope(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`telescope --data-dir DATA ARGS` as a subprocess on its own SQLite database (stdout and
    stderr are pipes, not terminals)."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "TELESCOPE_DATA_DIR")}
    return subprocess.run([sys.executable, "-m", "telescope_ui.cli", "--data-dir", str(data),
                           *args], env=environ, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def silent(p: argparse.ArgumentParser) -> list[str]:
    """The options and arguments of `p` without help text."""
    return [a.dest for a in p._actions
            if not a.help or a.help == argparse.SUPPRESS or not str(a.help).strip()]


def test_telescope_help_lists_every_sub_command() -> None:
    done = subprocess.run([sys.executable, "-m", "telescope_ui.cli", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines()
              if line.startswith("    ") and line.split()}
    assert set(SUBCOMMANDS) <= listed
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert all(str(choice.help).strip() for choice in sub._choices_actions)  # each one's line


def test_docs_list_every_command() -> None:
    """docs/protocol.md's table of commands: each `telescope` sub-command, and the client's
    console script (clients/python/pyproject.toml)."""
    protocol = (ROOT / "docs" / "protocol.md").read_text()
    table = protocol.split("| command | what |", 1)[1].split("\n\n", 1)[0]
    assert [n for n in subparsers() if f"`telescope {n} " not in table] == []
    assert "`telescope-sync" in table
    assert 'telescope-sync = "trainer_hooks.sync:main"' in (
        ROOT / "clients" / "python" / "pyproject.toml").read_text()


@pytest.mark.parametrize("name", sorted(subparsers()))
def test_every_option_of_every_sub_command_has_help_text(name: str) -> None:
    assert name in SUBCOMMANDS  # (and each of SUBCOMMANDS is listed by --help, above)
    assert silent(subparsers()[name]) == []


def test_token_takes_a_project_a_list_or_a_revoke() -> None:
    p = parser()
    assert p.parse_args(["token", "alpha"]).project == "alpha"
    listed = p.parse_args(["token", "--list", "alpha"])
    assert listed.list and listed.project == "alpha"
    assert p.parse_args(["token", "--revoke", "tsk_abcd"]).revoke == "tsk_abcd"
    with pytest.raises(SystemExit):
        p.parse_args(["token", "--list", "--revoke", "tsk_abcd"])


@pytest.mark.parametrize(("app", "name"), [(app, name) for app, names in MANAGEMENT.items()
                                           for name in names])
def test_every_option_of_every_management_command_has_help_text(app: str, name: str) -> None:
    command = load_command_class(app, name)
    assert silent(command.create_parser("manage.py", name)) == []
    assert str(command.help).strip()


@pytest.mark.parametrize("shared", arguments.SHARED, ids=lambda s: s.name)
def test_a_shared_sub_command_is_its_management_command(shared: arguments.Shared) -> None:
    """`telescope X` has the options of `manage.py x`, with the same help: one definition."""
    app = "telescope_ui" if shared.command == "demo" else "ingest"
    command = load_command_class(app, shared.command)
    own = {a.dest: a.help for a in command.create_parser("manage.py", shared.command)._actions}
    cli = {a.dest: a.help for a in subparsers()[shared.name]._actions
           if a.dest not in ("help", "data_dir", "traceback")}  # the CLI's own
    assert cli and all(own.get(dest) == text for dest, text in cli.items())
    assert command.help == shared.help == subparsers()[shared.name].description


ENVS = """
environments:
  - name: puzzles
    reward_min: 0
    reward_max: 4
    metrics_ranges:
      correct: {min: 0, max: 1}
"""
MORE = """
environments:
  - name: math
    reward_max: "1.0"
"""
TYPO = """
environments:
  - name: puzzles
    reward_minimum: 0
"""


def declared(data: Path) -> dict[str, tuple[float | None, float | None]]:
    with sqlite3.connect(data / "telescope.sqlite3") as db:
        return {name: (lo, hi) for name, lo, hi in db.execute(
            "SELECT name, reward_min, reward_max FROM ingest_environment")}


def test_declare_ranges_declares_a_runs_ranges_and_strict_names_an_unknown_key(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = telescope(data, "demo", "--project", "p", "--run", "r", "--steps", "3")
    assert made.returncode == 0, made.stderr
    # The demo's progress, written to pipes: plain lines, no carriage return.
    assert "\r" not in made.stdout + made.stderr
    assert "demo: ingesting: 3/3 steps (100%)\n" in made.stderr
    assert "puzzles" not in declared(data)  # the demo declares others
    (tmp_path / "envs.yaml").write_text(ENVS)
    (tmp_path / "more.yaml").write_text(MORE)
    (tmp_path / "typo.yaml").write_text(TYPO)

    done = telescope(data, "declare-ranges", "--project", "p", "--run", "r",
                     str(tmp_path / "envs.yaml"))
    assert done.returncode == 0, done.stderr
    assert "Declared 1 environment(s) on run 'r': puzzles" in done.stdout
    assert declared(data) == {"puzzles": (0.0, 4.0)}  # they replace the demo's

    refused = telescope(data, "declare-ranges", "--strict", "--project", "p", "--run", "r",
                        str(tmp_path / "more.yaml"), str(tmp_path / "typo.yaml"))
    assert refused.returncode == 1
    # An error, named with its file and key, that says so (not "ignored": nothing was).
    assert f"{tmp_path / 'typo.yaml'}: environments[0]: unknown key 'reward_minimum' is an " \
        "error with --strict (did you mean 'reward_min'?)" in refused.stderr
    assert "ignored" not in refused.stderr and "warning" not in refused.stderr
    assert declared(data) == {"puzzles": (0.0, 4.0)}  # nothing changed

    both = telescope(data, "declare-ranges", "--project", "p", "--run", "r",
                     str(tmp_path / "envs.yaml"), str(tmp_path / "more.yaml"))
    assert both.returncode == 0, both.stderr
    assert declared(data) == {"puzzles": (0.0, 4.0), "math": (None, 1.0)}
    assert "declare-ranges: 2/2 files (100%)\n" in both.stderr and "\r" not in both.stderr


def test_progress_off_a_terminal_is_plain_lines() -> None:
    """A line per tenth of the total, and one every `every` seconds while the count moves,
    each ended by a newline; never a carriage return (a pipe or a log file shows each as
    written)."""
    out = io.StringIO()
    now = [0.0]
    progress = Progress("import 'x'", 1000, stream=out, every=10.0, clock=lambda: now[0])
    progress.note("reading…")
    for done in range(0, 1001, 7):
        progress.update(done)
    progress.update(1000)
    progress.close()
    text = out.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    assert lines[0] == "import 'x': reading…"
    assert lines[1:] == [f"import 'x': {n:,}/1,000 steps ({n // 10}%)"
                         for n in (0, 105, 203, 301, 406, 504, 602, 700, 805, 903, 1000)]
    slow = io.StringIO()
    progress = Progress("demo", None, stream=slow, every=10.0, clock=lambda: now[0])
    for done in range(1, 6):  # no total: a line when `every` seconds have gone by
        now[0] += 4.0
        progress.update(done)
    progress.close()
    assert slow.getvalue() == "demo: 1 steps\ndemo: 4 steps\ndemo: 5 steps\n"  # 4 s, 16 s, end


def test_progress_on_a_terminal_is_one_line_redrawn() -> None:
    """A real pseudo-terminal: the bar is redrawn in place with a carriage return, and the
    line ended with a newline once done."""
    leader, follower = pty.openpty()
    terminal = os.fdopen(follower, "w", encoding="utf-8")
    now = [0.0]
    progress = Progress("import 'x'", 40, stream=terminal, clock=lambda: now[0])
    assert progress.terminal
    for done in range(0, 41, 10):
        now[0] += 1.0
        progress.update(done)
    progress.close()
    terminal.close()
    text = b""
    while chunk := _read(leader):
        text += chunk
    os.close(leader)
    drawn = text.decode()
    assert drawn.count("\r") >= 5 and "\n" not in drawn.rstrip("\r\n")  # one line, redrawn
    assert "import 'x' [" + "#" * 30 + "] 40/40 steps" in drawn
    assert drawn.endswith("\n")


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # the terminal's other end closed: all read
        return b""


@pytest.mark.django_db
def test_the_sign_in_page_names_the_telescope_command() -> None:
    page = Client(REMOTE_ADDR="203.0.113.9").get("/accounts/login/").content.decode()
    assert "telescope manage createsuperuser" in page and "manage.py" not in page
