"""A samples message's label columns (`env`, `stop_reason`, `discard_reason`) leave the sender
dictionary-encoded when their values repeat — `{"values", "codes"}`, the codes a typed array —
built from what each `log_samples` call already is (one value for all: always; a list: by a
helper-process sender only, a lookup per sample costing the trainer's thread more than packing
the strings), and validate to exactly what the lists would; a server older than that form
refuses it, and the client sends the message again with lists, same id, counted and warned
once, and lists from then on."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from tests.hooks_sender.test_sender import ScriptedServer, offline, spooled
from trainer_hooks.transport.batching import build_fields
from trainer_hooks.transport.client import connect
from trainer_hooks.transport.samples import MAX_CODED_VALUES, SampleChunk, make_chunk
from trainer_hooks.wire import protocol as p
from trainer_hooks.wire.arrays import INT64

N = 64


def chunk(env: Any, start: int = 0, code_lists: bool = True, **columns: Any) -> SampleChunk:
    problems: list[str] = []
    c = make_chunk(0, list(range(start, start + N)), [i // 4 for i in range(N)],
                   np.arange(N, dtype=float), env, None, columns, 1.7e9, problems,
                   code_lists=code_lists)
    assert not problems
    return c


def expanded(column: dict[str, Any]) -> list[Any]:
    message: dict[str, Any] = {"env": column}
    assert p.unpack_labels(message)
    out: list[Any] = message["env"]
    return out


def test_the_batch_codes_repeating_labels_from_its_chunks() -> None:
    stops = ["length", None, "stop", "stop"] * (N // 4)
    a = chunk("math", stop_reason=stops)  # one env for all the call's samples
    b = chunk(["code", "math", None, "code"] * (N // 4), start=N)  # no stop_reason
    batch = build_fields([a, b])
    assert set(batch.coded) == {"env", "stop_reason"}
    env, stop = batch.coded["env"], batch.coded["stop_reason"]
    assert sorted(env["values"]) == ["code", "math"] and env["codes"].dtype == np.int8
    assert expanded(env) == batch.fields["env"] == ["math"] * N + b.env  # type: ignore[operator]
    assert expanded(stop) == batch.fields["stop_reason"] == stops + [None] * N
    assert build_fields([a, b], code_labels=False).coded == {}


def test_without_code_lists_only_a_calls_one_value_for_all_is_coded() -> None:
    lists = chunk(["a", "b"] * (N // 2), code_lists=False, stop_reason=["x", None] * (N // 2))
    assert build_fields([lists]).coded == {}
    ones = [chunk("a", code_lists=False, stop_reason="x"),
            chunk("b", start=N, code_lists=False, discard_reason="max_async")]
    batch = build_fields(ones)
    assert set(batch.coded) == {"env", "stop_reason", "discard_reason"}
    assert expanded(batch.coded["stop_reason"]) == ["x"] * N + [None] * N
    assert build_fields([*ones, lists]).coded.keys() == {"discard_reason"}  # (lists: none)


def test_labels_that_do_not_repeat_stay_a_list() -> None:
    names = [f"env-{i}" for i in range(N)]
    batch = build_fields([chunk(names)])
    assert batch.coded == {} and batch.fields["env"] == names
    assert build_fields([chunk("math")]).fields["env"] == "math"  # one for all: a string
    # few for their count (one per 8 samples) but more than one-byte codes index
    many = [chunk(f"env-{i}", start=i * N) for i in range(MAX_CODED_VALUES + 1)]
    assert build_fields(many).coded == {}
    assert set(build_fields(many[:MAX_CODED_VALUES]).coded) == {"env"}


def test_a_part_of_a_call_is_coded_by_the_values_it_has() -> None:
    c = chunk(["a"] * (N // 2) + ["b"] * (N // 2))
    half = c.part(0, N // 2)  # its distinct values as the whole call's: a superset
    coded = build_fields([half]).coded["env"]
    assert expanded(coded) == ["a"] * (N // 2)


@pytest.mark.parametrize(("encoding", "sender"), [("msgpack", "thread"), ("json", "thread"),
                                                 ("msgpack", "process")])
def test_the_sealed_message_validates_as_its_lists(tmp_path: Path, encoding: str,
                                                   sender: str) -> None:
    client = offline(tmp_path, encoding=encoding, sender=sender)
    reasons = [None, "max_async", None, "zero_advantage"] * (N // 4)
    for k, env in enumerate(("math", "countdown")):  # one env a call
        client.log_samples(0, sample_id=list(range(k * N, (k + 1) * N)),
                           group_id=[i // 8 for i in range(N)], reward=np.linspace(0, 1, N),
                           env=env, discard_reason=reasons, stop_reason="stop")
    assert client.sync()
    [raw] = spooled(client, raw=True)
    [listed] = spooled(client)
    client.close(timeout=0.1)
    coded = {"env", "stop_reason"} | ({"discard_reason"} if sender == "process" else set())
    for name in ("env", "discard_reason", "stop_reason"):
        assert isinstance(raw[name], dict) == (name in coded), name
        if name in coded:
            assert set(raw[name]) == {"values", "codes"}
            # a binary frame: one typed array, not N integers
            assert isinstance(raw[name]["codes"], np.ndarray) == (encoding == "msgpack")
    assert listed["env"] == ["math"] * N + ["countdown"] * N
    assert listed["discard_reason"] == reasons * 2 and listed["stop_reason"] == ["stop"] * 2 * N
    got, want = p.validate_message(raw), p.validate_message(listed)
    assert isinstance(got, p.Samples) and isinstance(want, p.Samples)
    for name in ("env", "discard_reason", "stop_reason"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist()


def older_server(msg: dict[str, Any], n: int) -> Any:
    """What a server older than coded labels replies: the first such column it validates
    (discard_reason, env, then stop_reason) is a wrong type."""
    for name in ("discard_reason", "env", "stop_reason"):
        if isinstance(msg.get(name), dict):
            return {"type": "error", "code": "wrong_type", "field": name,
                    "message": f"{name} must be a list"}
    return "ack"


def test_a_server_older_than_coded_labels_gets_lists_again_and_from_then_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    envs = ["math"] * N + ["code"] * N
    with ScriptedServer(older_server) as server, caplog.at_level(logging.WARNING):
        c = connect(server.url, "tok", "r", spool_dir=tmp_path)

        def two_calls(step: int) -> None:
            for k, env in enumerate(("math", "code")):
                c.log_samples(step, sample_id=list(range(k * N, (k + 1) * N)), group_id=k,
                              reward=[1.0] * N, env=env, stop_reason="length")

        two_calls(0)
        assert c.flush(10), c.not_stored
        two_calls(1)
        assert c.flush(10), c.not_stored
        stats = c.stats
        assert c.close(5)
    first, again, later = server.received
    assert first["env"]["values"] and isinstance(first["env"]["codes"], msgpack.ExtType)
    assert first["env"]["codes"].code == INT64 and isinstance(first["stop_reason"], dict)
    assert again["id"] == first["id"] and again["env"] == envs
    assert again["stop_reason"] == ["length"] * 2 * N
    assert again["reward"] == first["reward"]  # the same samples
    assert later["env"] == envs  # sealed as lists: not refused first
    assert stats["labels_as_lists"] == 1 and stats["rejected"] == 0 and c.not_stored == []
    assert stats["text_as_lists"] == 0
    assert sum("dictionary-encoded" in r.getMessage() for r in caplog.records) == 1


def test_with_packed_text_too_an_older_server_gets_both_as_lists(tmp_path: Path) -> None:
    """A server older than both forms refuses them one after the other: the labels first
    (text stays packed), then the text (the labels stay lists)."""
    def reply(msg: dict[str, Any], n: int) -> Any:
        if isinstance(msg.get("completion"), msgpack.ExtType) and \
                not isinstance(msg.get("env"), dict):
            return {"type": "error", "code": "wrong_type", "field": "completion",
                    "message": "completion must be a list"}
        return older_server(msg, n)

    envs = ["math"] * N + ["code"] * N
    with ScriptedServer(reply) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path)
        for k, env in enumerate(("math", "code")):
            c.log_samples(0, sample_id=list(range(k * N, (k + 1) * N)), group_id=k,
                          reward=[1.0] * N, env=env, completion=["yes"] * N)
        assert c.flush(10), c.not_stored
        stats = c.stats
        assert c.close(5)
    first, labels, text = server.received
    assert isinstance(first["env"], dict) and isinstance(first["completion"], msgpack.ExtType)
    assert labels["env"] == envs and isinstance(labels["completion"], msgpack.ExtType)
    assert text["env"] == envs and text["completion"] == ["yes"] * 2 * N
    assert first["id"] == labels["id"] == text["id"]
    assert stats["labels_as_lists"] == 1 and stats["text_as_lists"] == 1
    assert stats["rejected"] == 0 and c.not_stored == []
