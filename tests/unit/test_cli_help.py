"""Every option of every `telescope` sub-command has --help text (docs/protocol.md
"Commands"), and `telescope token` takes PROJECT, --list [PROJECT] or --revoke PREFIX."""

from __future__ import annotations

import argparse

import pytest

from telescope_ui.cli import parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_option_has_help(name: str) -> None:
    silent = [a.dest for a in subcommands()[name]._actions if not a.help]
    assert silent == []


def test_token_takes_a_project_a_list_or_a_revoke() -> None:
    p = parser()
    assert p.parse_args(["token", "alpha"]).project == "alpha"
    listed = p.parse_args(["token", "--list", "alpha"])
    assert listed.list and listed.project == "alpha"
    assert p.parse_args(["token", "--revoke", "tsk_abcd"]).revoke == "tsk_abcd"
    with pytest.raises(SystemExit):
        p.parse_args(["token", "--list", "--revoke", "tsk_abcd"])
