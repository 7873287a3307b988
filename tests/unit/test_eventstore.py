"""ingest.core.eventstore: `events` and `gauges` messages stored one blob each and read back as
one table. Round trips keep every value and every null (integer and string servers and ids
alike), many blobs with different label lists merge into one list without duplicates (ids:
joined, each row's id kept), blobs of the previous format (zlib) still read, and `window` takes
exactly the events overlapping [t0, t1)."""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pytest
import zstandard

from ingest.core import eventstore as es
from trainer_hooks.wire.schema import EVENT_STATUSES, Events, Gauges, Labels

COLUMNS = ("name", "start", "end", "source", "step", "rank", "server", "slot", "status",
           "tokens", "sample_id", "group_id")


def labels(values: list[Any], rng: random.Random | None = None) -> Labels:
    """A Labels column of `values` (None = null), its list in first-seen or random order."""
    distinct: list[Any] = []
    for v in values:
        if v is not None and not any(v == d and type(v) is type(d) for d in distinct):
            distinct.append(v)
    if rng is not None:
        rng.shuffle(distinct)
    index = {(type(v), v): i for i, v in enumerate(distinct)}
    codes = [-1 if v is None else index[(type(v), v)] for v in values]
    return Labels(distinct, np.array(codes, dtype=np.int32))


def message(rows: list[dict[str, Any]], rng: random.Random | None = None) -> Events:
    """An Events message of rows (dicts keyed by COLUMNS; absent = null, source 'trainer')."""
    def ints(key: str) -> np.ndarray:
        return np.array([-1 if r.get(key) is None else r[key] for r in rows], dtype=np.int64)

    return Events(
        id="m", type="events", run="r", n=len(rows),
        name=labels([r["name"] for r in rows], rng),
        start=np.array([r["start"] for r in rows], dtype=np.float64),
        end=np.array([math.nan if r.get("end") is None else r["end"] for r in rows]),
        source=labels([r.get("source", "trainer") for r in rows], rng),
        step=ints("step"), rank=ints("rank"), server=labels([r.get("server") for r in rows], rng),
        slot=ints("slot"),
        status=np.array([-1 if r.get("status") is None else EVENT_STATUSES.index(r["status"])
                         for r in rows], dtype=np.int8),
        tokens=ints("tokens"), sample_id=labels([r.get("sample_id") for r in rows], rng),
        group_id=labels([r.get("group_id") for r in rows], rng))


def expected(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """What `to_columns` must give for rows: every column, null where a row has none."""
    out: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for r in rows:
        for c in COLUMNS:
            out[c].append(r.get(c, "trainer" if c == "source" else None))
    return out


def assert_columns(got: dict[str, list[Any]], want: dict[str, list[Any]]) -> None:
    assert sorted(got) == sorted(COLUMNS)
    for c in COLUMNS:
        assert got[c] == want[c], c
        # 3 and "3" are different servers and ids: the types survive too
        assert [type(v) for v in got[c]] == [type(v) for v in want[c]], c


MIXED = [
    {"name": "forward", "start": 1.5, "end": 2.25, "step": 0, "rank": 1},
    {"name": "generation", "start": 2.0, "end": 5.0, "source": "inference", "server": 3,
     "slot": 2, "status": "canceled", "tokens": 40, "sample_id": "s-1", "group_id": 7},
    {"name": "generation", "start": 2.5, "end": 2.5, "source": "inference", "server": "3",
     "slot": 0, "status": "normal", "tokens": 0, "sample_id": 12, "group_id": "g"},
    {"name": "save_batch", "start": 3.0, "source": "orchestrator", "step": 2**40},
    {"name": "train_step/forward", "start": 1.7e9 + 0.125, "end": 1.7e9 + 1.5, "rank": 0,
     "status": "eval", "tokens": 2**62, "sample_id": -5},
    {"name": "générer ✓", "start": -1.0, "end": 0.0, "source": "reward", "status": "discarded",
     "server": 0, "group_id": 0},
]


def test_a_message_round_trips_with_every_null_and_type() -> None:
    blob = es.encode_events(message(MIXED))
    assert isinstance(blob, bytes)
    table = es.decode_events([blob])
    assert table.n == len(MIXED)
    assert table.name.dtype == np.int32 and table.server.dtype == np.int32
    assert table.step.dtype == np.int64 and table.status.dtype == np.int8
    assert table.start.dtype == np.float64 and table.end.dtype == np.float64
    assert_columns(es.to_columns(table), expected(MIXED))


def test_all_null_columns_round_trip() -> None:
    rows = [{"name": "checkpoint", "start": float(i)} for i in range(5)]  # instants, no labels
    table = es.decode_events([es.encode_events(message(rows))])
    assert np.isnan(table.end).all() and (table.step == -1).all() and (table.server == -1).all()
    assert table.servers == [] and table.sample_ids == []
    assert_columns(es.to_columns(table), expected(rows))


def random_rows(rng: random.Random, n: int) -> list[dict[str, Any]]:
    names = ["forward", "backward", "generation", f"op{rng.randint(0, 50)}", "a/b"]
    servers = [None, 0, 1, "0", "srv-a", f"srv-{rng.randint(0, 9)}"]
    rows = []
    for _ in range(n):
        start = rng.uniform(0, 100)
        row: dict[str, Any] = {"name": rng.choice(names), "start": start}
        if rng.random() < 0.8:
            row["end"] = start + rng.uniform(0, 5)
        row["source"] = rng.choice(["trainer", "inference", "orchestrator",
                                    f"w{rng.randint(0, 3)}"])
        picks: tuple[tuple[str, Callable[[], Any]], ...] = (
            ("step", lambda: rng.randint(0, 1000)),
            ("rank", lambda: rng.randint(0, 7)),
            ("slot", lambda: rng.randint(0, 31)),
            ("tokens", lambda: rng.randint(0, 10**6)),
            ("status", lambda: rng.choice(EVENT_STATUSES)),
            ("server", lambda: rng.choice(servers)),
            ("sample_id", lambda: rng.choice([rng.randint(0, 10**4),
                                              f"id{rng.randint(0, 300)}"])),
            ("group_id", lambda: rng.choice([rng.randint(0, 99), "g"])))
        for key, pick in picks:
            if rng.random() < 0.6:
                value = pick()
                if value is not None:
                    row[key] = value
        rows.append(row)
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_many_blobs_with_different_dictionaries_concatenate(seed: int) -> None:
    """Each blob has its own label lists in its own order; decoding them together gives every
    row in blob order and one list per label column, each label once (the ids' lists are
    joined: a row's code gives its id, checked through to_columns)."""
    rng = random.Random(seed)
    parts = [random_rows(rng, rng.choice([1, 3, 40, 300])) for _ in range(rng.randint(2, 9))]
    blobs = [es.encode_events(message(rows, rng)) for rows in parts]
    table = es.decode_events(blobs)
    assert_columns(es.to_columns(table), expected([r for rows in parts for r in rows]))
    for values in (table.names, table.sources, table.servers):
        keyed = [(type(v), v) for v in values]
        assert len(set(keyed)) == len(keyed), "a label listed twice"
    # concat_events (the same merge over decoded tables) agrees
    merged = es.concat_events([es.decode_events([b]) for b in blobs])
    assert_columns(es.to_columns(merged), expected([r for rows in parts for r in rows]))


def test_no_blobs_is_an_empty_table() -> None:
    table = es.decode_events([])
    assert table.n == 0
    assert es.to_columns(table) == {c: [] for c in COLUMNS}


def test_labels_are_compressed_only_when_it_pays() -> None:
    tiny = msgpack.unpackb(es.encode_events(message(MIXED[:2])), raw=False)
    assert tiny["z"] == 0 and tiny["v"] == 2
    rows = [{"name": f"an/operation/with/a/long/name/{i % 300}", "start": float(i),
             "sample_id": f"sample-{i:08d}"} for i in range(4096)]
    big = msgpack.unpackb(es.encode_events(message(rows)), raw=False)
    assert big["z"] == 2 and big["zi"] == 2  # zstd
    unzstd = zstandard.ZstdDecompressor()
    assert len(big["labels"]) < len(unzstd.decompress(big["labels"]))
    assert len(big["ids"]) < len(unzstd.decompress(big["ids"]))
    table = es.decode_events([es.encode_events(message(rows))])
    assert_columns(es.to_columns(table), expected(rows))


def as_format_1(blob: bytes) -> bytes:
    """A format-2 blob as the previous format stored it: the same map, "v" 1, the label
    lists (and ids) zlib level 1 where compressed, "z" / "zi" a bool."""
    m = msgpack.unpackb(blob, raw=False)
    m["v"] = 1
    for z, key in (("z", "labels"), ("zi", "ids")):
        if key in m:
            if m[z] == 2:
                m[key] = zlib.compress(zstandard.ZstdDecompressor().decompress(m[key]), 1)
            m[z] = bool(m[z])
    out: bytes = msgpack.packb(m, use_bin_type=True)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_blobs_of_format_1_still_read_beside_format_2(seed: int) -> None:
    """A database written before zstd holds format-1 blobs (zlib): read alone and mixed with
    new ones in one decode, they give what the rows were."""
    rng = random.Random(seed)
    parts = [random_rows(rng, rng.choice([3, 40, 600])) for _ in range(3)]
    parts.insert(rng.randint(0, 3), [  # ids that compress
        {"name": "generation", "start": float(i), "end": i + 0.5, "sample_id": f"s-{i:06d}"}
        for i in range(2000)])
    new = [es.encode_events(message(rows, rng)) for rows in parts]
    old = [as_format_1(b) for b in new]
    assert any(msgpack.unpackb(b, raw=False).get("zi") is True for b in old)
    rows = [r for p in parts for r in p]
    for blobs in (old, [b if i % 2 else o for i, (o, b) in enumerate(zip(old, new,
                                                                           strict=True))]):
        assert_columns(es.to_columns(es.decode_events(blobs)), expected(rows))
        assert es.decode_events(blobs, ids=False).n == len(rows)


def test_integer_columns_take_the_narrowest_type() -> None:
    rows = [{"name": "forward", "start": 0.0, "end": 1.0, "step": s, "rank": 1}
            for s in range(100)]
    small = msgpack.unpackb(es.encode_events(message(rows)), raw=False)
    assert small["step"][0] == "<i1" and small["rank"][0] == "<i1"
    assert small["slot"] is None and small["codes"]["server"] is None
    rows[0]["step"] = 2**40
    wide = msgpack.unpackb(es.encode_events(message(rows)), raw=False)
    assert wide["step"][0] == "<i8"


def test_a_blob_of_another_format_is_refused() -> None:
    blob = msgpack.unpackb(es.encode_events(message(MIXED)), raw=False)
    blob["v"] = 99
    with pytest.raises(ValueError, match="format 99"):
        es.decode_events([msgpack.packb(blob, use_bin_type=True)])


def test_event_bounds_use_the_latest_end_or_instant() -> None:
    rows = [{"name": "a", "start": 5.0, "end": 6.0}, {"name": "b", "start": 9.0},
            {"name": "c", "start": 2.0, "end": 8.5}]
    assert es.event_bounds(message(rows)) == (2.0, 9.0)
    assert es.event_bounds(message(rows[:1] + rows[2:])) == (2.0, 8.5)


EDGES = [
    {"name": "instant at t0", "start": 10.0},
    {"name": "instant before", "start": 9.999},
    {"name": "instant at t1", "start": 20.0},
    {"name": "instant inside", "start": 15.0},
    {"name": "ends at t0", "start": 5.0, "end": 10.0},
    {"name": "ends before t0", "start": 5.0, "end": 9.5},
    {"name": "starts at t1", "start": 20.0, "end": 25.0},
    {"name": "starts before t1", "start": 19.5, "end": 25.0},
    {"name": "straddles both", "start": 0.0, "end": 30.0},
    {"name": "empty span at t0", "start": 10.0, "end": 10.0},
]


def test_window_takes_what_overlaps_the_half_open_interval() -> None:
    table = es.decode_events([es.encode_events(message(EDGES))])
    got = es.to_columns(es.window(table, 10.0, 20.0))["name"]
    assert got == ["instant at t0", "instant inside", "ends at t0", "starts before t1",
                   "straddles both", "empty span at t0"]
    assert es.window(table, 30.5, 40.0).n == 0
    assert es.to_columns(es.window(table, 25.0, 25.5))["name"] == ["starts at t1",
                                                                   "starts before t1",
                                                                   "straddles both"]


def test_window_matches_a_row_by_row_filter() -> None:
    rng = random.Random(3)
    rows = random_rows(rng, 2000)
    table = es.decode_events([es.encode_events(message(rows[:700])),
                              es.encode_events(message(rows[700:], rng))])
    for _ in range(20):
        t0 = rng.uniform(-5, 105)
        t1 = t0 + rng.uniform(0, 30)
        want = [r for r in rows if r["start"] < t1 and r.get("end", r["start"]) >= t0]
        assert_columns(es.to_columns(es.window(table, t0, t1)), expected(want))


# ---------------------------------------------------------------- gauges


def gauges(points: list[tuple[float, str, float | None, Any, Any]],
           rng: random.Random | None = None) -> Gauges:
    return Gauges(
        id="g", type="gauges", run="r", n=len(points),
        time=np.array([p[0] for p in points], dtype=np.float64),
        name=labels([p[1] for p in points], rng),
        value=np.array([math.nan if p[2] is None else p[2] for p in points]),
        host=labels([p[3] for p in points], rng), device=labels([p[4] for p in points], rng))


def gauge_rows(g: es.GaugeTable) -> list[tuple[float, str, float | None, Any, Any]]:
    def at(values: list[Any], code: int) -> Any:
        return None if code < 0 else values[code]

    return [(float(g.time[i]), g.names[int(g.name[i])],
             None if math.isnan(g.value[i]) else float(g.value[i]),
             at(g.hosts, int(g.host[i])), at(g.devices, int(g.device[i]))) for i in range(g.n)]


GAUGES = [
    (100.0, "gpu/util_pct", 55.5, "node-1", 0),
    (100.0, "gpu/util_pct", None, "node-1", 1),
    (100.5, "gpu/mem_used_bytes", 8.0e9, "node-1", "0"),
    (101.0, "cpu/util_pct", 12.0, None, None),
    (99.0, "vllm/num_requests_running", 3.0, "node-2", None),
]


def test_gauges_round_trip_and_merge() -> None:
    rng = random.Random(1)
    more: list[tuple[float, str, float | None, Any, Any]] = [
        (200.0 + i, f"gpu/power_w{i % 3}", float(i), f"node-{i % 4}", i % 8) for i in range(500)]
    g = es.decode_gauges([es.encode_gauges(gauges(GAUGES)), es.encode_gauges(gauges(more, rng))])
    assert g.time.dtype == np.float64 and g.name.dtype == np.int32
    assert gauge_rows(g) == GAUGES + more
    assert len(g.hosts) == len(set(g.hosts)) == 4  # node-1..3 twice listed, merged
    assert sorted(map(str, g.devices)) == sorted(["0", *map(str, range(8))])
    assert es.gauge_bounds(gauges(GAUGES)) == (99.0, 101.0)
    inside = es.gauge_window(g, 100.0, 101.0)
    assert gauge_rows(inside) == GAUGES[:3]


def test_no_gauge_blobs_is_an_empty_table() -> None:
    g = es.decode_gauges([])
    assert g.n == 0 and g.names == [] and g.value.dtype == np.float64
