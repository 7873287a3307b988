"""The samples read API (GET /api/runs/<id>/samples, docs/protocol.md) and sample text on the wire
(prompt and completion): every stored column of a step's samples, ordered by group then
reward, filtered by environment, kept / discarded and reward range, paged; `prompt` and
`completion` stored compressed apart from the numeric columns and returned only with `text=1`;
the per-message and per-run text limits; errors naming the field. Runs on SQLite and, with
DATABASE_URL, PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from django.test import Client, override_settings

from ingest.core import texts
from ingest.core.series_ids import series_id
from ingest.models import Project, Run, SampleBatch, SampleText, SampleTextUsage
from ingest.pipeline.materialize import materialize_all
from ingest.reads.catalog import series
from ingest.write import housekeeping
from ingest.write.frames import handle_object
from tests.server.conftest import Trainer
from trainer_hooks.wire import protocol as p

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project() -> Iterator[int]:
    yield Project.objects.create(name="p").pk


def msg(mid: str, step: Any, rewards: list[Any], groups: list[Any], **extra: Any
        ) -> dict[str, Any]:
    return {"v": 1, "id": mid, "type": "samples", "run": "r", "step": step,
            "sample_id": [f"{mid}-{i}" for i in range(len(rewards))], "group_id": groups,
            "reward": rewards, **extra}


def send(project: int, *msgs: dict[str, Any]) -> list[dict[str, Any]]:
    return [handle_object(project, m).reply for m in msgs]


def get(path: str, **params: Any) -> tuple[int, Any]:
    res = Client().get(path, params)
    return res.status_code, res.json()


def run_id() -> int:
    return Run.objects.get(name="r").pk


def by_id(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["sample_id"]: s for s in body["samples"]}


def test_text_is_returned_only_when_asked_for_and_matches_what_was_sent(project: int) -> None:
    prompts = ["What is 2 + 2?", "Ünïcode ✓ <b>&amp;</b>", None, "tab\tnew\nline"]
    completions = ["4", "<script>alert(1)</script>", "no prompt", None]
    [ack] = send(project, msg("m1", 3, [1.0, 0.0, 0.5, 0.25], ["g", "g", "g", "g"],
                              env="math", prompt=prompts, completion=completions))
    assert ack == {"type": "ack", "id": "m1"}
    url = f"/api/runs/{run_id()}/samples"

    status, body = get(url, step=3)
    assert status == 200 and body["total"] == 4
    assert all("prompt" not in s and "completion" not in s for s in body["samples"])

    status, body = get(url, step=3, text=1)
    got = by_id(body)
    for i in range(4):
        assert got[f"m1-{i}"]["prompt"] == prompts[i]
        assert got[f"m1-{i}"]["completion"] == completions[i]


def test_text_is_stored_compressed_apart_from_the_numeric_columns(project: int) -> None:
    completion = ["the quick brown fox jumps over the lazy dog " * 50] * 8
    send(project, msg("m1", 0, [0.0] * 8, [0] * 8, completion=completion))
    [batch] = SampleBatch.objects.all()
    [row] = SampleText.objects.all()  # one row for the message's step, compressed at once
    assert b"lazy dog" not in bytes(batch.data)  # aggregation reads never see text
    assert (row.step, row.msg_id, row.n) == (0, "m1", 8)
    assert row.nbytes == sum(len(c) for c in completion) == texts.run_bytes(run_id())
    data = bytes(row.data)
    assert len(data) < row.nbytes / 10  # repetitive text compresses
    assert data[:1] == texts.ZSTD
    assert texts.decode(data) == (None, completion)


def test_a_message_over_two_steps_keeps_each_text_with_its_sample(project: int) -> None:
    steps = [5, 4, 5, 4, 5]
    send(project, msg("m1", steps, [0.1, 0.2, 0.3, 0.4, 0.5], [0, 0, 0, 0, 0],
                      prompt=[f"p{i}" for i in range(5)], completion=[f"c{i}" for i in range(5)]),
         msg("m2", 4, [0.9, 0.8], [0, 0]))  # same step, no text at all
    url = f"/api/runs/{run_id()}/samples"
    for step in (4, 5):
        _, body = get(url, step=step, text=1)
        sent = [i for i, s in enumerate(steps) if s == step]
        got = by_id(body)
        assert {f"m1-{i}" for i in sent} <= set(got)
        for i in sent:
            assert (got[f"m1-{i}"]["prompt"], got[f"m1-{i}"]["completion"]) == (f"p{i}", f"c{i}")
    _, body = get(url, step=4, text=1)
    assert by_id(body)["m2-0"]["prompt"] is None and by_id(body)["m2-0"]["completion"] is None


def test_samples_come_by_group_then_reward_with_every_stored_column(project: int) -> None:
    send(project,
         msg("a", 1, [0.5, None, 1.0, 0.0], ["g2", "g2", "g1", "g1"], env="x",
             advantage=[0.1, None, 0.5, -0.5], prompt_tokens=[10, 11, 12, 13],
             completion_tokens=[100, 101, 102, 103], stop_reason=["stop", "length", None, "stop"],
             off_policy_steps=[0, 1, 2, 0], discard_reason=[None, None, None, "max_async"],
             time=[1e9, 1e9, 1e9, 1e9], metrics={"correct": [1, 0, 1, None]}),
         msg("b", 1, [0.75], ["g2"], env="y", metrics={"other": [3.0]}))
    _, body = get(f"/api/runs/{run_id()}/samples", step=1)
    assert [(s["group_id"], s["reward"]) for s in body["samples"]] == [
        ("g1", 1.0), ("g1", 0.0), ("g2", 0.75), ("g2", 0.5), ("g2", None)]
    first = body["samples"][0]
    assert first == {
        "step": 1, "sample_id": "a-2", "group_id": "g1", "env": "x", "reward": 1.0,
        "advantage": 0.5, "prompt_tokens": 12.0, "completion_tokens": 102.0,
        "stop_reason": None, "off_policy_steps": 2.0, "discard_reason": None, "time": 1e9,
        "metrics": {"correct": 1.0, "other": None}}
    assert by_id(body)["a-3"]["discard_reason"] == "max_async"
    assert by_id(body)["b-0"]["advantage"] is None and by_id(body)["b-0"]["metrics"] == {
        "correct": None, "other": 3.0}
    assert body["environments"] == ["x", "y"] and body["metrics"] == ["correct", "other"]


def test_integer_groups_sort_as_numbers(project: int) -> None:
    send(project, msg("a", 0, [1.0, 2.0, 3.0], [10, 9, 100]))
    _, body = get(f"/api/runs/{run_id()}/samples", step=0)
    assert [s["group_id"] for s in body["samples"]] == [9, 10, 100]


def test_filters_by_environment_kept_and_reward_range_with_paging(project: int) -> None:
    send(project,
         msg("a", 2, [0.0, 0.2, 0.4, 0.6, 0.8, None], ["g"] * 6, env="x",
             discard_reason=[None, None, "zero_advantage", None, None, None]),
         msg("b", 2, [0.1, 0.9], ["h", "h"], env="y"))
    url = f"/api/runs/{run_id()}/samples"

    def ids(**params: Any) -> tuple[list[str], int]:
        status, body = get(url, step=2, **params)
        assert status == 200
        return [s["sample_id"] for s in body["samples"]], body["total"]

    assert ids(env="y") == (["b-1", "b-0"], 2)
    assert ids(env="nowhere") == ([], 0)
    assert ids(env="x", kept=0) == (["a-2"], 1)
    assert ids(env="x", kept=1)[1] == 5
    assert ids(min_reward=0.4, max_reward=0.8) == (["a-4", "a-3", "a-2"], 3)  # nulls out
    assert ids(min_reward=0.85) == (["b-1"], 1)
    assert ids(limit=3) == (["a-4", "a-3", "a-2"], 8)
    assert ids(limit=3, offset=6) == (["b-1", "b-0"], 8)
    assert ids(limit=0) == ([], 8)


@pytest.mark.parametrize(("params", "field"), [
    ({"step": "x"}, "step"), ({"step": "-1"}, "step"), ({"limit": "10001"}, "limit"),
    ({"limit": "a"}, "limit"), ({"offset": "-2"}, "offset"), ({"kept": "maybe"}, "kept"),
    ({"min_reward": "abc"}, "min_reward"), ({"max_reward": "nan"}, "max_reward"),
    ({"min_reward": "2", "max_reward": "1"}, "max_reward"), ({"text": "please"}, "text"),
])
def test_bad_parameters_are_refused_naming_the_field(project: int, params: dict[str, str],
                                                     field: str) -> None:
    send(project, msg("a", 0, [1.0], [0]))
    status, body = get(f"/api/runs/{run_id()}/samples", **params)
    assert status == 400 and body["field"] == field and body["error"]


def test_an_unknown_run_is_404_and_a_step_without_samples_is_empty(project: int) -> None:
    assert get("/api/runs/999999/samples")[0] == 404
    send(project, msg("a", 2, [1.0], [0]), msg("b", 7, [1.0], [0]), msg("c", 9, [0.5], [0]))
    url = f"/api/runs/{run_id()}/samples"
    status, body = get(url, step=5)
    assert status == 200 and body["samples"] == [] and body["total"] == 0
    assert (body["prev_step"], body["next_step"]) == (2, 7)
    _, body = get(url)  # no step: the newest one with samples
    assert body["step"] == 9 and body["total"] == 1
    assert (body["first_step"], body["last_step"], body["prev_step"], body["next_step"]) == (
        2, 9, 7, None)


def test_colour_ranges_are_declared_else_observed_and_carry_invert(project: int) -> None:
    send(project, {"v": 1, "id": "start", "type": "run.start", "run": "r", "environments": [
        {"name": "x", "reward_min": 0, "reward_max": 2,
         "metrics_ranges": {"steps": {"min": 0, "max": 20, "invert": True}}}]},
         msg("a", 0, [0.5, 1.5], [0, 0], env="x", metrics={"steps": [3, 4], "free": [1, 5]}),
         msg("b", 0, [-1.0, 3.0], [1, 1], env="y"))
    _, body = get(f"/api/runs/{run_id()}/samples", step=0)
    x, y = body["ranges"]["x"], body["ranges"]["y"]
    assert x["reward"] == {"min": 0.0, "max": 2.0, "invert": False, "source": "declared"}
    assert x["metrics"]["steps"] == {"min": 0.0, "max": 20.0, "invert": True,
                                     "source": "declared"}
    assert x["metrics"]["free"] == {"min": 1.0, "max": 5.0, "invert": False,
                                    "source": "observed"}
    assert y["reward"] == {"min": -1.0, "max": 3.0, "invert": False, "source": "observed"}


def test_text_changes_no_aggregate(project: int) -> None:
    rewards = [0.0, 1.0, 0.5, 0.25]
    base = msg("a", 0, rewards, [0, 0, 1, 1])
    send(project, {**base, "run": "plain"}, {**base, "prompt": ["p"] * 4, "completion": ["c"] * 4})
    materialize_all()
    mean = series_id("reward", "reward", "mean", None)
    plain, text = (series(Run.objects.get(name=n).pk, [mean], 100, None, None)["series"][mean]
                   for n in ("plain", "r"))
    assert plain["value"] == text["value"] == [sum(rewards) / 4]


@override_settings(TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE=100)
def test_a_message_over_the_text_limit_is_refused_naming_the_field(project: int) -> None:
    ok, too_long, too_much = send(
        project,
        msg("ok", 0, [1.0, 0.0], [0, 0], prompt=["é" * 25] * 2),  # 100 bytes: the limit
        msg("long", 1, [1.0, 0.0], [0, 0], completion=["x", "y" * 101]),
        msg("much", 2, [1.0, 0.0], [0, 0], prompt=["p" * 40] * 2, completion=["c" * 21, None]))
    assert ok["type"] == "ack"
    assert (too_long["type"], too_long["code"], too_long["field"]) == ("error", "too_large",
                                                                       "completion")
    assert "completion[1]" in too_long["message"] and "100" in too_long["message"]
    assert (too_much["field"], too_much["code"]) == ("completion", "too_large")
    assert "101" in too_much["message"]
    assert sorted(SampleBatch.objects.values_list("step", flat=True)) == [0]  # nothing else


@override_settings(TELESCOPE_MAX_TEXT_BYTES_PER_RUN=1000)
def test_past_the_run_text_limit_samples_are_stored_without_text(project: int) -> None:
    first, second, plain = send(
        project,
        msg("a", 0, [1.0, 0.0], [0, 0], prompt=["p" * 400] * 2),
        msg("b", 1, [0.5, 0.25], [0, 0], prompt=["q" * 100] * 2, completion=["c", "d"]),
        msg("c", 2, [0.5], [0]))
    assert first == {"type": "ack", "id": "a"} and plain == {"type": "ack", "id": "c"}
    assert second["type"] == "ack" and set(second["left_out"]) == {"prompt", "completion"}
    assert "TELESCOPE_MAX_TEXT_BYTES_PER_RUN" in second["left_out"]["prompt"]
    assert texts.run_bytes(run_id()) == 800
    _, body = get(f"/api/runs/{run_id()}/samples", step=1, text=1)
    assert body["total"] == 2 and all(s["prompt"] is None for s in body["samples"])


@pytest.mark.parametrize(("field", "value", "code"), [
    ("prompt", "one string", "wrong_type"), ("completion", ["a", 1], "wrong_type"),
    ("prompt", ["a"], "length_mismatch"), ("completion", [["nested"], None], "wrong_type"),
])
def test_malformed_text_columns_are_refused_naming_the_field(project: int, field: str,
                                                             value: Any, code: str) -> None:
    [reply] = send(project, msg("m", 0, [1.0, 0.0], [0, 0], **{field: value}))
    assert (reply["type"], reply["field"], reply["code"]) == ("error", field, code)


async def test_text_travels_over_the_websocket_as_msgpack(trainer: Trainer) -> None:
    frame = msgpack.packb(msg("ws", 0, [1.0], [0], prompt=["¿qué?"], completion=["sí"]))
    reply = await trainer.send_raw(data=frame)
    assert reply == {"type": "ack", "id": "ws"}
    too_big = msg("big", 0, [1.0], [0], completion=["z" * (p.text_limit() + 1)])
    reply = await trainer.send_raw(data=msgpack.packb(too_big))
    assert (reply["type"], reply["field"]) == ("error", "completion")


def test_the_viewer_page_embeds_the_step_escaped(project: int) -> None:
    send(project, msg("a", 4, [1.0], [0], env="</script><b>x</b>"))
    res = Client().get(f"/runs/{run_id()}/samples?step=4")
    assert res.status_code == 200
    html = res.content.decode()
    assert "</script><b>" not in html and "\\u003c/script\\u003e\\u003cb\\u003e" in html
    assert 'id="samples-initial"' in html
    assert Client().get("/runs/999999/samples").status_code == 404


def test_deleting_a_run_removes_its_text(project: int) -> None:
    other = {**msg("b", 0, [1.0], [0], prompt=["kept"]), "run": "other"}
    send(project, msg("a", 0, [1.0], [0], prompt=["gone"]), other)
    assert housekeeping.delete(run_id())
    assert list(SampleText.objects.values_list("msg_id", flat=True)) == ["b"]
    assert list(SampleTextUsage.objects.values_list("nbytes", flat=True)) == [4]
