"""Identity records keep a list of strings (envs, string ids) as one joined string
(`outbox.lines`) and read back exactly what was sealed, whatever the strings hold."""

from __future__ import annotations

from pathlib import Path

import msgpack
import numpy as np
import pytest

from trainer_hooks.transport.outbox import LINES, Outbox, Outgoing, identity_columns, lines
from trainer_hooks.transport.resume import identity_record


@pytest.mark.parametrize("env", [["math", "countdown"] * 3, ["a\nb", "c"], ["x", None], [""],
                                 ["é", "\u2028", "ü"], "one", None])
def test_string_columns_come_back_as_sealed(env: object) -> None:
    n = len(env) if isinstance(env, list) else 2
    ids = [f"s{i}" for i in range(n)]
    fields = {"step": np.full(n, 4, dtype=np.int64), "env": env, "group_id": ids,
              "sample_id": np.arange(n)}
    step, got_env, gids, sids = identity_columns(identity_record(fields)[2])
    assert step == [4] * n and got_env == env and gids == ids and sids == list(range(n))


def test_only_plain_string_lists_are_joined() -> None:
    assert lines(["a", "b"]) == msgpack.ExtType(LINES, b"a\nb")
    for value in (["a\n", "b"], ["a", None], [1, 2], [], "ab", None):
        assert lines(value) == value


def test_a_resume_reads_joined_and_older_list_records(tmp_path: Path) -> None:
    spool = Outbox(tmp_path / "a.sqlite")
    spool.take_incarnation(False, "inc")
    new = identity_record({"step": 3, "env": ["x", "y"], "group_id": ["g", "g"],
                           "sample_id": ["1", "2"]})
    old = (4, 4, msgpack.packb([4, ["x"], ["g"], ["3"]]))  # a record written before `lines`
    spool.append([Outgoing("m-1", "samples", 2, "msgpack", b"x", new),
                  Outgoing("m-2", "samples", 1, "msgpack", b"y", old)])
    spool.close()
    again = Outbox(tmp_path / "a.sqlite")
    try:
        assert again.take_incarnation(True, "new") == "inc"
        assert again.previous_keys(3, 4) == {3: {("x", "g", "1"), ("y", "g", "2")},
                                             4: {("x", "g", "3")}}
    finally:
        again.close()
