"""The `events` and `gauges` validators: what they decode into (numpy columns and `Labels`),
the errors they raise (each naming the field and the row), typed arrays through a real
msgpack frame, and `split`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from trainer_hooks.wire import protocol as p


def events(**columns: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": ["forward", "backward", "forward"],
                            "start": [100.0, 101.0, 102.5]}
    return {"v": 1, "id": "e", "type": "events", "run": "r", **base, **columns}


def gauges(**columns: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"time": [100.0, 110.0], "name": "gpu/util_pct", "value": [50, 75.5]}
    return {"v": 1, "id": "g", "type": "gauges", "run": "r", **base, **columns}


def refused(msg: dict[str, Any]) -> p.ProtocolError:
    with pytest.raises(p.ProtocolError) as info:
        p.validate_message(msg)
    return info.value


def via_msgpack(msg: dict[str, Any]) -> Any:
    """The message through a binary frame as the sender encodes it (numpy columns become
    typed arrays) and the server decodes it."""
    return p.validate_message(p.decode_frame(p.encode(msg, "msgpack"), binary=True))


def test_events_decode_into_columns_and_labels() -> None:
    msg = p.validate_message(events(
        end=[100.5, None, 103.0], source="trainer", step=[7, 7, None], rank=0,
        server=[None, "vllm-0", 3], status=["normal", None, "eval"], tokens=[None, 12, 0],
        sample_id=["s1", None, 4]))
    assert isinstance(msg, p.Events) and msg.n == 3
    assert msg.name.values == ["forward", "backward"] and msg.name.codes.tolist() == [0, 1, 0]
    assert msg.name.codes.dtype == np.int32
    assert msg.start.tolist() == [100.0, 101.0, 102.5]
    assert msg.end[0] == 100.5 and np.isnan(msg.end[1]) and msg.end[2] == 103.0
    assert msg.source.values == ["trainer"] and msg.source.codes.tolist() == [0, 0, 0]
    assert msg.step.tolist() == [7, 7, -1] and msg.step.dtype == np.int64
    assert msg.rank.tolist() == [0, 0, 0] and msg.slot.tolist() == [-1, -1, -1]
    assert [msg.server.at(i) for i in range(3)] == [None, "vllm-0", 3]
    assert msg.status.tolist() == [0, -1, 3] and msg.status.dtype == np.int8
    assert msg.tokens.tolist() == [-1, 12, 0]
    assert [msg.sample_id.at(i) for i in range(3)] == ["s1", None, 4]
    assert msg.group_id.values == [] and msg.group_id.codes.tolist() == [-1, -1, -1]
    assert msg.left_out == {}


def test_absent_columns_have_their_defaults() -> None:
    msg = p.validate_message(events())
    assert isinstance(msg, p.Events)
    assert msg.source.values == ["trainer"] and np.isnan(msg.end).all()
    assert (msg.status == -1).all() and (msg.step == -1).all() and (msg.tokens == -1).all()


def test_a_null_source_is_the_trainer() -> None:
    msg = p.validate_message(events(source=[None, "inference", None]))
    assert isinstance(msg, p.Events)
    assert [msg.source.at(i) for i in range(3)] == ["trainer", "inference", "trainer"]


def test_a_message_of_scalars_is_one_instant() -> None:
    msg = p.validate_message({"v": 1, "id": "i", "type": "events", "run": "r",
                              "name": "training_loop_start", "start": 1.7e9,
                              "source": "orchestrator"})
    assert isinstance(msg, p.Events) and msg.n == 1
    assert msg.name.at(0) == "training_loop_start" and np.isnan(msg.end[0])


def test_typed_arrays_for_times_and_integer_columns() -> None:
    start = np.array([100.0, 101.0, 102.5])
    msg = via_msgpack(events(start=start, end=start + 0.25,
                             step=np.array([1, 2, 3]), slot=np.array([0.0, np.nan, 2.0]),
                             server=np.array([4, 4, 9])))
    assert isinstance(msg, p.Events)
    assert msg.end.tolist() == [100.25, 101.25, 102.75]
    assert msg.step.tolist() == [1, 2, 3] and msg.slot.tolist() == [0, -1, 2]
    assert msg.server.values == [4, 9] and msg.server.codes.tolist() == [0, 0, 1]


@pytest.mark.parametrize(("columns", "field", "says"), [
    ({"end": [100.5, 100.0, 103.0]}, "end", "end[1] must be ≥ start"),
    ({"start": [100.0, None, 1.0]}, "start", "start[1] is null"),
    ({"start": [100.0, 1.7e12, 1.0]}, "start", "milliseconds"),
    ({"start": [100.0, -1.0, 1.0]}, "start", "start[1] must be unix seconds"),
    ({"start": [100.0, "101", 1.0]}, "start", "start[1] must be unix seconds"),
    ({"end": [100.5, float("inf"), None]}, "end", "end[1] must be unix seconds"),
    ({"name": ["forward", None, "x"]}, "name", "name[1] is null"),
    ({"name": ["forward", 3, "x"]}, "name", "name[1] must be a string"),
    ({"name": ["forward", "", "x"]}, "name", "name[1] is empty"),
    ({"name": ["a", "b", "x" * 201]}, "name", "name[2] is 201 characters"),
    ({"name": ["a", "evil\u202egpj.exe", "a"]}, "name", "name[1] contains a control or "
                                                         "invisible character (U+202E)"),
    ({"name": "tab\there"}, "name", "U+0009"),
    ({"source": ["trainer", "", "trainer"]}, "source", "source[1] is empty"),
    ({"step": [1, -2, 3]}, "step", "step[1] must be ≥ 0"),
    ({"step": [1, 2.0, 3]}, "step", "step[1] must be an integer or null, not float"),
    ({"rank": True}, "rank", "rank must be an integer"),
    ({"rank": -1}, "rank", "rank must be an integer ≥ 0"),
    ({"tokens": [1, 2**70, 3]}, "tokens", "out of range"),
    ({"status": ["normal", "ok", None]}, "status", "status[1] is 'ok'"),
    ({"status": "ok"}, "status", "status is 'ok'"),
    ({"server": [1.5, 0, 0]}, "server", "server[0] must be a string or an integer"),
    ({"sample_id": [True, 0, 0]}, "sample_id", "sample_id[0] must be a string or an integer"),
    ({"end": [100.5, 101.0]}, "end", "end has 2 values; name has 3"),
    ({"name": [], "start": []}, "name", "name is empty"),
])
def test_bad_events_name_the_field_and_the_row(columns: dict[str, Any], field: str,
                                               says: str) -> None:
    error = refused(events(**columns))
    assert error.field == field
    assert says in error.message


def test_bad_typed_arrays_name_the_row() -> None:
    error = p.ProtocolError("x", None, "")
    for column, values in (("slot", np.array([0.0, 1.5, 2.0])), ("step", np.array([1, -1, 0])),
                           ("name", np.array([1, 2, 3]))):
        with pytest.raises(p.ProtocolError) as info:
            via_msgpack(events(**{column: values}))
        error = info.value
        assert error.field == column
    assert error.message == "name must hold strings"


def test_the_required_columns_are_named() -> None:
    msg = events()
    del msg["start"]
    assert (refused(msg).code, refused(msg).field) == ("missing_field", "start")
    msg = events()
    del msg["name"]
    assert refused(msg).field == "name"


def test_too_many_events_are_refused() -> None:
    n = p.MAX_EVENTS_PER_MESSAGE + 1
    error = refused(events(name="x", start=np.full(n, 100.0)))
    assert (error.code, error.field) == ("too_many", "start")


def test_unknown_fields_are_left_out_and_named() -> None:
    msg = p.validate_message(events(tokenz=[1, 2, 3], colour="red"))
    assert isinstance(msg, p.Events)
    assert msg.left_out["tokenz"].startswith("not a column of events, left out")
    assert "did you mean 'tokens'" in msg.left_out["tokenz"]
    assert set(msg.left_out) == {"tokenz", "colour"}


def test_labels_of_many_rows_are_coded_once_per_distinct_value() -> None:
    n = 50_000
    names = [("forward", "backward", "optimizer_step")[i % 3] for i in range(n)]
    msg = p.validate_message(events(name=names, start=np.arange(n, dtype=float).tolist(),
                                    rank=[i % 8 for i in range(n)]))
    assert isinstance(msg, p.Events)
    assert msg.name.values == ["forward", "backward", "optimizer_step"]
    assert (np.array(msg.name.values)[msg.name.codes] == np.array(names)).all()
    assert np.bincount(msg.rank).tolist() == [n // 8] * 8


def test_gauges_decode_into_columns() -> None:
    msg = p.validate_message(gauges(value=[50, float("nan")], host="node-1", device=[0, "cpu"]))
    assert isinstance(msg, p.Gauges) and msg.n == 2
    assert msg.time.tolist() == [100.0, 110.0]
    assert msg.name.values == ["gpu/util_pct"] and msg.name.codes.tolist() == [0, 0]
    assert msg.value[0] == 50.0 and np.isnan(msg.value[1])
    assert msg.host.values == ["node-1"]
    assert [msg.device.at(i) for i in range(2)] == [0, "cpu"]


def test_gauge_values_may_be_null_or_not_finite_and_arrive_as_typed_arrays() -> None:
    msg = via_msgpack(gauges(time=np.array([100.0, 110.0, 120.0]),
                             name=["a", "b", "a"], value=np.array([1.0, np.inf, 3.0]),
                             device=np.array([1, 0, 1])))
    assert isinstance(msg, p.Gauges)
    assert msg.value[0] == 1.0 and np.isnan(msg.value[1]) and msg.value[2] == 3.0
    assert msg.device.values == [0, 1] and msg.device.codes.tolist() == [1, 0, 1]
    assert p.validate_message(gauges(value=[None, None])).value.tolist() != [0.0, 0.0]


@pytest.mark.parametrize(("columns", "field", "says"), [
    ({"time": [100.0, None]}, "time", "time[1] is null"),
    ({"time": [100.0, 2e10]}, "time", "time[1] must be unix seconds"),
    ({"name": ["a", "b\x00"]}, "name", "name[1] contains a control or invisible character"),
    ({"name": None}, "name", "required"),
    ({"value": [1, "2"]}, "value", "value must hold numbers or nulls"),
    ({"value": "2"}, "value", "value must hold numbers or nulls"),
    ({"host": 3}, "host", "host must be a string, not int"),
    ({"host": ["a", ""]}, "host", "host[1] is empty"),
    ({"device": [0, 1.0]}, "device", "device[1] must be a string or an integer"),
    ({"value": [1.0]}, "value", "value has 1 values; time has 2"),
])
def test_bad_gauges_name_the_field(columns: dict[str, Any], field: str, says: str) -> None:
    error = refused(gauges(**columns))
    assert error.field == field
    assert says in error.message


def test_split_halves_events_by_rows_keeping_scalars() -> None:
    msg = events(end=np.array([100.5, 101.5, 103.0]), source="inference", step=[1, 2, 3])
    halves = p.split(msg)
    assert halves is not None
    first, second = halves
    assert (first["id"], second["id"]) == ("e.0", "e.1")
    assert first["name"] == ["forward"] and second["name"] == ["backward", "forward"]
    assert first["end"].tolist() == [100.5] and second["step"] == [2, 3]
    assert first["source"] == second["source"] == "inference"
    for half in halves:
        assert isinstance(p.validate_message(half), p.Events)
    assert p.split(events(name="x", start=[1.0])) is None
    assert p.split({**events(), "name": "x", "start": 1.0}) is None


def test_split_halves_gauges_through_their_frame() -> None:
    n = 11
    msg = gauges(time=np.arange(n) + 100.0, value=np.arange(n) * 1.0,
                 device=list(range(n)), host="h")
    halves = p.split(p.decode(p.encode(msg, "msgpack"), "msgpack"))
    assert halves is not None
    decoded = [p.validate_message(h) for h in halves]
    assert [d.n for d in decoded] == [5, 6]
    assert np.concatenate([d.value for d in decoded if isinstance(d, p.Gauges)]).tolist() \
        == list(range(n))


def test_label_columns_may_come_dictionary_encoded() -> None:
    codes = np.array([0, 1, 0], dtype=np.int64)
    for frame in (events(name={"values": ["forward", "backward"], "codes": [0, 1, 0]},
                         source={"values": ["inference"], "codes": [0, -1, 0]},
                         server={"values": [3, "b"], "codes": codes}),):
        for msg in (p.validate_message(frame), via_msgpack(frame)):
            assert [msg.name.at(i) for i in range(3)] == ["forward", "backward", "forward"]
            # a null source is the trainer, as in a list
            assert [msg.source.at(i) for i in range(3)] == ["inference", "trainer", "inference"]
            assert [msg.server.at(i) for i in range(3)] == [3, "b", 3]
    points = p.validate_message(gauges(name={"values": ["a", "b"], "codes": [1, 0]}))
    assert [points.name.at(i) for i in range(2)] == ["b", "a"]


@pytest.mark.parametrize(("column", "field", "says"), [
    ({"values": ["forward", "forward"], "codes": [0, 0, 0]}, "name.values", "distinct"),
    ({"values": ["forward"], "codes": [0, 1, 0]}, "name.codes",
     "name.codes[1] is 1; it must index name.values (0–0) or be -1"),
    ({"values": ["forward"], "codes": [0, -1, 0]}, "name", "name[1] is null"),
    ({"values": ["forward"], "codes": [0, 0]}, "start", "start has 3 values; name has 2"),
    ({"values": ["ok", "evil\u202etxt"], "codes": [0, 1, 0]}, "name.values",
     "name.values[1] contains a control or invisible character (U+202E)"),
    ({"values": ["forward", ""], "codes": [0, 1, 0]}, "name.values", "name.values[1] is empty"),
    ({"values": ["forward"], "codes": [0.0, 0.0, 0.0]}, "name.codes", "list of integers"),
    ({"values": "forward", "codes": [0, 0, 0]}, "name.values", "must be a list"),
    ({"values": ["forward"]}, "name", "exactly the fields 'values' and 'codes'"),
])
def test_bad_dictionary_encoded_labels_name_the_field(column: dict[str, Any], field: str,
                                                     says: str) -> None:
    exc = refused(events(name=column))
    assert exc.field == field and says in str(exc)


def test_what_the_client_sends_is_dictionary_encoded_and_reads_back_the_same() -> None:
    from trainer_hooks.timeline.columns import clean_events, wire_columns

    n = 64
    rows = {"name": ["forward", "backward"] * (n // 2), "start": [100.0 + i for i in range(n)],
            "end": [None] * n, "source": ["trainer"] * (n - 1) + ["inference"],
            "step": [None] * n, "rank": [None] * n, "server": [None] * n, "slot": [None] * n,
            "status": [None] * n, "tokens": [None] * n,
            "sample_id": [None] * (n - 2) + ["s1", "s2"], "group_id": [None] * n}
    for lists in (False, True):  # msgpack (typed codes) and JSON (lists)
        kept, wire = wire_columns(clean_events(dict(rows), n), "events", lists_for_nulls=lists)
        assert kept == n
        assert wire["name"]["values"] == ["forward", "backward"]  # repeated: encoded
        assert "values" in wire["sample_id"]  # mostly null: encoded
        fmt = "json" if lists else "msgpack"
        msg = p.validate_message(p.decode_frame(p.encode(
            {"v": 1, "id": "e", "type": "events", "run": "r", **wire}, fmt), binary=not lists))
        for name in ("name", "source", "sample_id"):
            assert [getattr(msg, name).at(i) for i in range(n)] == rows[name]
        halves = p.split({"v": 1, "id": "e", "type": "events", "run": "r", **wire})
        assert halves is not None
        back = [p.validate_message(h) for h in halves]
        assert [b.n for b in back] == [n // 2, n // 2]
        assert [back[1].sample_id.at(i) for i in range(n // 2)] == rows["sample_id"][n // 2:]
