"""The whole-run export (GET /api/runs/<id>/export.csv, docs/protocol.md "Export"): every
series of the run — step keys, categorical ones too, and the per-step sample aggregates — one
row per point, its values the stored floats exactly; streamed in pieces; 404 for no run."""

from __future__ import annotations

import csv
import io
import math
import zlib
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient, Client

from ingest.core import categorical, pointstore
from ingest.models import Project, Run, Series
from ingest.pipeline.materialize import materialize_all
from ingest.reads import export
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)


def send(project: int, **msg: Any) -> None:
    reply = handle_object(project, {"v": 1, "run": "r", **msg}).reply
    assert reply["type"] == "ack", reply


@pytest.fixture
def run_id() -> int:
    project = Project.objects.create(name="proj").pk
    rng = np.random.default_rng(7)
    for step in range(40):
        send(project, id=f"s{step}", type="step", step=step, time=1.7e9 + step * 0.1,
             metrics={"loss/policy": float(rng.normal()), "lr": 1e-6 / (step + 1),
                      "phase, \"quoted\"": "warm" if step < 20 else "hot, \"really\""})
        n = 4
        send(project, id=f"x{step}", type="samples", step=step, env="math, v2",
             sample_id=[f"{step}-{i}" for i in range(n)], group_id=[0, 0, 1, 1],
             reward=[float(v) for v in rng.random(n)],
             metrics={"length": [float(v) for v in rng.integers(1, 900, n)]})
    pk = Run.objects.get().pk
    materialize_all(pk)
    return pk


@pytest.fixture
async def closes_thread_connections() -> AsyncIterator[None]:
    """The AsyncClient's requests use a database connection on asgiref's thread for sync code;
    closed after the test, or PostgreSQL refuses to drop the test database in use."""
    yield
    await sync_to_async(connections.close_all)()


async def download(run_id: int) -> tuple[Any, list[dict[str, str]]]:
    """Through the ASGI handler, as the server serves it (an async stream of pieces)."""
    res = await AsyncClient().get(f"/api/runs/{run_id}/export.csv")
    assert res.status_code == 200
    text = b"".join([piece async for piece in res.streaming_content]).decode()
    return res, list(csv.DictReader(io.StringIO(text)))


async def test_every_series_is_exported_with_its_stored_values_exactly(
        run_id: int, closes_thread_connections: None) -> None:
    res, rows = await download(run_id)
    await sync_to_async(check_rows)(run_id, res, rows)


def check_rows(run_id: int, res: Any, rows: list[dict[str, str]]) -> None:
    assert res.streaming
    assert res["Content-Type"].startswith("text/csv")
    assert res["Content-Disposition"] == f'attachment; filename="run-{run_id}.csv"'
    series = list(Series.objects.filter(run_id=run_id).order_by("pk"))
    kinds = {s.kind for s in series}
    assert {"step", "reward", "sample", "groups", "discarded"} <= kinds
    stored = pointstore.load(run_id, [s.pk for s in series])
    tables = categorical.texts([s.pk for s in series if s.categorical])
    by_sid: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_sid.setdefault(row["series"], []).append(row)
    assert list(by_sid) == [s.sid for s in series if stored[s.pk][0].size]
    assert len(rows) == sum(a[0].size for a in stored.values())
    for s in series:
        got = by_sid.get(s.sid, [])
        step, time, value = stored[s.pk]
        assert {(r["kind"], r["key"], r["stat"], r["env"]) for r in got} <= {
            (s.kind, s.key, s.stat or "", s.env or "")}
        assert [int(r["step"]) for r in got] == step.tolist()
        assert [float(r["time"]) if r["time"] else math.nan for r in got] == pytest.approx(
            time.tolist(), abs=0, rel=0, nan_ok=True)
        if s.pk in tables:
            assert [r["value"] for r in got] == categorical.decode(value, tables[s.pk])
        else:
            assert [float(r["value"]) for r in got] == value.tolist()  # exactly, not approx
    phase = [r["value"] for r in rows if r["key"] == 'phase, "quoted"']
    assert phase[0] == "warm" and phase[-1] == 'hot, "really"'
    assert {r["env"] for r in rows if r["kind"] == "reward"} == {"", "math, v2"}


def test_a_long_series_streams_in_pieces(run_id: int) -> None:
    pieces = list(export.csv_chunks(run_id, chunk_rows=7))
    assert pieces[0] == b"series,kind,key,stat,env,step,time,value\n"
    assert len(pieces) > len(Series.objects.filter(run_id=run_id)) + 1
    assert max(p.count(b"\n") for p in pieces[1:]) <= 7
    assert b"".join(pieces) == b"".join(export.csv_chunks(run_id))


def test_no_run_is_a_404() -> None:
    res = Client().get("/api/runs/999/export.csv")
    assert res.status_code == 404 and res.json() == {"error": "no run 999"}


async def test_a_gzip_download_is_one_gzip_stream(run_id: int,
                                                  closes_thread_connections: None) -> None:
    """Browsers decode only a body's first gzip member: the pieces are one stream, not one
    member each (what Django's GZipMiddleware makes of an async stream)."""
    res = await AsyncClient().get(f"/api/runs/{run_id}/export.csv",
                                  headers={"Accept-Encoding": "gzip, deflate, br"})
    assert res["Content-Encoding"] == "gzip"
    packed = b"".join([piece async for piece in res.streaming_content])
    unpacker = zlib.decompressobj(31)
    text = unpacker.decompress(packed)
    assert unpacker.eof and not unpacker.unused_data
    plain = await AsyncClient().get(f"/api/runs/{run_id}/export.csv")
    assert "Content-Encoding" not in plain
    assert text == b"".join([piece async for piece in plain.streaming_content])
    assert text.count(b"\n") > 1000
