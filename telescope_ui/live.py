"""Browser live updates (`/ws/live/`): sequence-numbered deltas per run, with resync.

Client → server: `{"type": "subscribe", "run": ID, "after_seq": N}` (N = the `seq` of the
snapshot it loaded), `{"type": "unsubscribe", "run": ID}`, `{"type": "resync", "run": ID,
"after_seq": N}`.
Server → client: `{"type": "delta", "run", "from_seq", "seq", "points": {sid: {step, time,
value}}, "series": [new catalog entries]}` — apply only when `from_seq` equals the last seq
applied, else ask for a resync; a null value withdraws a point. `{"type": "run", "run", "info"}`
when a run's status or last step changes, and when it is deleted (`info` then `{"id", "deleted":
true, "project", "name", "deleted_at"}`; the subscription ends); `{"type": "progress", "run",
"pending"}` on subscribe and while a backlog of steps is (re-)aggregated (0 when done);
`{"type": "reset", "run"}` when the gap is too large to replay (reload the snapshot). Deltas
are coalesced to at most one per interval per run.

The database is the source of truth: every WATCH_SECONDS / 2 a page compares its runs' seqs with
the database's, and a run that moved on without a delta reaching the page for WATCH_SECONDS
(the channel layer is down — Redis killed — or a publish was lost) is replayed from the database.
So live updates degrade to reading the database while the layer is out, and nothing is missed.
A watched run whose row is gone was deleted (by another process, or while the layer was out):
the page is told as by the broadcast; a subscription to a deleted run is answered likewise.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from ingest.core.broadcast import group_name
from ingest.models import Run
from ingest.reads.catalog import changes_since, pending_steps, run_seqs
from ingest.write.housekeeping import deleted_info
from telescope_ui.access import may_read, scope_client

CLOSE_FORBIDDEN = 4403
log = logging.getLogger(__name__)

MAX_REPLAY_POINTS = 50_000
MAX_SUBSCRIPTIONS = 64
WATCH_SECONDS = 2.0


class LiveConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.last_seq: dict[int, int] = {}
        self.ungrouped: set[int] = set()  # watched runs whose group the layer did not take
        self.pending: dict[int, list[dict[str, Any]]] = {}
        self.flush_task: asyncio.Task[None] | None = None
        self.watch_task: asyncio.Task[None] | None = None
        self.last_flush = 0.0
        self.interval = settings.TELESCOPE_LIVE_INTERVAL_MS / 1000
        if not may_read(scope_client(self.scope), self.scope.get("user")):
            # sign in first (telescope_ui.access); accepted first so the page gets the close
            # code (a refused handshake is only an HTTP 403)
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.accept()  # pages only subscribe, replay and forward: aggregation is the
        # pipeline's (ingest.pipeline.materialize), never driven from here

    async def disconnect(self, code: int) -> None:
        for run_id in list(self.last_seq):
            await self._leave(run_id)
        for task in (self.flush_task, getattr(self, "watch_task", None)):
            if task:
                task.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            msg = orjson.loads(text_data or bytes_data or b"")
            kind, run_id = msg["type"], int(msg["run"])
            after = int(msg.get("after_seq") or 0)
            if not (0 <= run_id < 2**63 and 0 <= after < 2**63):
                raise ValueError("out of range")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            await self._send({"type": "error", "message": "expected {type, run, after_seq}"})
            return
        if kind == "subscribe":
            await self._subscribe(run_id, after)
        elif kind == "unsubscribe":
            self.last_seq.pop(run_id, None)
            self.pending.pop(run_id, None)
            await self._leave(run_id)
        elif kind == "resync" and run_id in self.last_seq:
            await self._replay(run_id, after)
        else:
            await self._send({"type": "error", "message": f"unknown request {kind!r}"})

    async def _subscribe(self, run_id: int, after: int) -> None:
        if len(self.last_seq) >= MAX_SUBSCRIPTIONS and run_id not in self.last_seq:
            await self._send({"type": "error", "message": "too many subscriptions"})
            return
        if not await database_sync_to_async(Run.objects.filter(pk=run_id).exists)():
            info = await database_sync_to_async(deleted_info)(run_id)
            if info is not None:  # deleted since the page read it
                await self._send({"type": "run", "run": run_id, "info": info})
            else:
                await self._send({"type": "error", "run": run_id, "message": "no such run"})
            return
        await self._join(run_id)
        await self._replay(run_id, after)
        if self.watch_task is None:
            self.watch_task = asyncio.ensure_future(self._watch())
        # The backlog now: a page rendered mid-backlog may have missed its final 0.
        pending = await database_sync_to_async(pending_steps)(run_id)
        await self._send({"type": "progress", "run": run_id, "pending": pending})

    async def _join(self, run_id: int) -> None:
        """Join the run's group. A layer that is down (Redis) does not fail the page: it reads
        the database (`_watch`) and joins once the layer answers again."""
        try:
            await self.channel_layer.group_add(group_name(run_id), self.channel_name)
        except Exception as exc:  # noqa: BLE001 - any failure of the layer: degrade, retry
            if not self.ungrouped:
                log.warning("a live page could not join run %d's updates (%s: %s); it reads "
                            "the database until the channel layer is back", run_id,
                            type(exc).__name__, exc)
            self.ungrouped.add(run_id)
        else:
            self.ungrouped.discard(run_id)

    async def _leave(self, run_id: int) -> None:
        self.ungrouped.discard(run_id)
        try:
            await self.channel_layer.group_discard(group_name(run_id), self.channel_name)
        except Exception:  # noqa: BLE001, S110 - the layer is down: its group expires
            pass

    async def _replay(self, run_id: int, after: int) -> None:
        """Send everything after `after` from the database (the source of truth)."""
        self.pending.pop(run_id, None)
        found = await database_sync_to_async(changes_since)(run_id, after, MAX_REPLAY_POINTS)
        if found is None:
            self.last_seq[run_id] = after
            await self._send({"type": "reset", "run": run_id})
            return
        points, seq = found
        self.last_seq[run_id] = max(seq, after)
        await self._send({"type": "delta", "run": run_id, "from_seq": after,
                          "seq": self.last_seq[run_id], "points": points, "series": []})

    async def _watch(self) -> None:
        """Replay a run from the database when its seq moved on but the page's stayed put for
        WATCH_SECONDS (see the module's docstring)."""
        stuck: dict[int, tuple[int, float]] = {}  # run -> (the page's seq, since when)
        while True:
            await asyncio.sleep(WATCH_SECONDS / 2)
            if not self.last_seq:
                continue
            for run_id in list(self.ungrouped):  # the layer may be back: join the group
                await self._join(run_id)
            watched = list(self.last_seq)
            seqs = await database_sync_to_async(run_seqs)(watched)
            for run_id in watched:
                if run_id not in seqs and run_id in self.last_seq:
                    await self._deleted(run_id)
            now = time.monotonic()
            for run_id, seq in seqs.items():
                last = self.last_seq.get(run_id)
                if last is None or seq <= last:
                    stuck.pop(run_id, None)
                    continue
                was, since = stuck.get(run_id, (None, now))
                if was != last:  # the page moved since the last look: not stuck (yet)
                    stuck[run_id] = (last, now)
                elif now - since >= WATCH_SECONDS:
                    stuck.pop(run_id, None)
                    await self._replay(run_id, last)

    async def run_points(self, event: dict[str, Any]) -> None:
        """A commit somewhere published points for a run this page watches."""
        run_id = event["run"]
        if run_id not in self.last_seq:
            return
        if event.get("info"):
            if event["info"].get("deleted"):
                await self._deleted(run_id, event["info"])
                return
            await self._send({"type": "run", "run": run_id, "info": event["info"]})
        if event.get("seq") is None:
            return
        self.pending.setdefault(run_id, []).append(event)
        if self.flush_task is None or self.flush_task.done():
            delay = max(0.0, self.last_flush + self.interval - time.monotonic())
            self.flush_task = asyncio.ensure_future(self._flush_later(delay))

    async def _deleted(self, run_id: int, info: dict[str, Any] | None = None) -> None:
        """Tell the page a watched run was deleted, once, and stop watching it."""
        if self.last_seq.pop(run_id, None) is None:
            return
        self.pending.pop(run_id, None)
        await self._leave(run_id)
        if info is None:
            info = await database_sync_to_async(deleted_info)(run_id) or {
                "id": run_id, "deleted": True}
        await self._send({"type": "run", "run": run_id, "info": info})

    async def run_progress(self, event: dict[str, Any]) -> None:
        """A backlog of a watched run's steps is being (re-)aggregated: steps left."""
        if event["run"] in self.last_seq:
            await self._send({"type": "progress", "run": event["run"],
                              "pending": event["pending"]})

    async def run_events(self, event: dict[str, Any]) -> None:
        """Events or gauges of a watched run committed: the Timeline and Performance pages
        refetch their window (the run's event extent tells them how far it reaches)."""
        if event["run"] in self.last_seq:
            await self._send({"type": "events", "run": event["run"],
                              "extent": event["extent"]})

    async def _flush_later(self, delay: float) -> None:
        """Send what is pending, at most once per interval, until nothing is (events that
        arrive while a flush is sending go out with the next one)."""
        while True:
            if delay > 0:
                await asyncio.sleep(delay)
            self.last_flush = time.monotonic()
            pending, self.pending = self.pending, {}
            for run_id, events in pending.items():
                await self._flush_run(run_id, events)
            if not self.pending:
                return
            delay = self.last_flush + self.interval - time.monotonic()

    async def _flush_run(self, run_id: int, events: list[dict[str, Any]]) -> None:
        last = self.last_seq.get(run_id)
        if last is None:
            return
        events = sorted((e for e in events if e["seq"] > last), key=lambda e: e["seq"])
        if not events:
            return
        seqs = [e["seq"] for e in events]
        if seqs != list(range(last + 1, last + 1 + len(seqs))):
            # A commit's broadcast is missing or late (another process, a dropped pub/sub
            # message): read the gap from the database instead.
            await self._replay(run_id, last)
            return
        head = f'{{"type":"delta","run":{run_id},"from_seq":{last},"seq":{seqs[-1]},'
        if len(events) == 1:  # its JSON as published, unparsed: {"points": …, "series": …}
            text = head + events[0]["payload"][1:].decode()
        else:
            points: dict[str, dict[str, list[Any]]] = {}
            series: list[dict[str, Any]] = []
            for e in events:
                got = orjson.loads(e["payload"])
                series.extend(got["series"])
                for sid, pt in got["points"].items():
                    into = points.setdefault(sid, {"step": [], "time": [], "value": []})
                    for col in ("step", "time", "value"):
                        into[col].extend(pt[col])
            text = head + orjson.dumps({"points": points, "series": series})[1:].decode()
        self.last_seq[run_id] = seqs[-1]  # (only once the delta is built: a failure replays)
        await self.send(text_data=text)

    async def _send(self, msg: dict[str, Any]) -> None:
        # NaN (a withdrawn point) becomes null; numpy arrays from replays serialize directly.
        await self.send(text_data=orjson.dumps(msg, option=orjson.OPT_SERIALIZE_NUMPY).decode())
