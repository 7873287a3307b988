"""The connection: outbox → server, on the sender thread (`engine.SenderEngine`).

One WebSocket session at a time: a sender task pipelines outbox messages in order, packing
consecutive small ones into batch frames (a list of messages; the server replies with a list, one
reply per message) of at most FRAME_ROWS messages and `frame_bytes` bytes — at most `max_in_flight`
frames / `max_in_flight_bytes` unacknowledged, under a client-side rate limit in frames per second —
and a receiver task matches acks and error replies by id; acknowledged and rejected messages are
deleted from the outbox in one transaction per COMMIT_EVERY (at once while a flush waits). When
the session ends everything unacknowledged is sent again, with its original id, after a capped
exponential backoff with jitter. Close codes:
4401 stops sending for good (the outbox is kept), 4413 splits the refused message in halves
and lowers the size limits, 4429 halves the message rate, 4500 (the server's storage failed)
and any other code reconnect and resend.

No server-side fault holds a trainer: when the oldest frame awaiting its reply has waited
`ack_timeout` seconds (60; plus BARRIER_WAIT for a frame holding a barrier, whose ack the server
holds until the run is aggregated) since it was sent or since the previous reply, whichever is
later, the session is dropped and everything unacknowledged sent again on a new one
(`stats["ack_timeouts"]`). While connected, a `heartbeat` goes every HEARTBEAT_SECONDS so the
server knows the trainer is alive between steps (docs/protocol.md "Run status").

The connection is handed what it works with: the run target, the outbox, the flush waiters it
resolves as messages leave the outbox, the bookkeeping, the event that says the outbox has new
messages, and a way to make the sealer's batches smaller.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import orjson

from trainer_hooks.transport.bookkeeping import Bookkeeping
from trainer_hooks.transport.options import SenderOptions
from trainer_hooks.transport.outbox import Outbox, Outgoing, Row
from trainer_hooks.transport.queue import FlushWaiters
from trainer_hooks.transport.run import RunTarget
from trainer_hooks.wire.protocol import (
    LABEL_COLUMNS,
    TEXT_COLUMNS,
    ProtocolError,
    decode,
    decode_frame,
    encode,
    unpack_labels,
    unpack_text,
)
from trainer_hooks.wire.protocol import split as split_message

log = logging.getLogger("trainer_hooks.sender")

CLOSE_BAD_TOKEN, CLOSE_TOO_LARGE, CLOSE_RATE_LIMITED = 4401, 4413, 4429
HEARTBEAT_SECONDS = 15.0
HEARTBEAT_PREFIX = "hb-"  # heartbeat ids: their replies belong to no frame of the outbox
BARRIER_WAIT = 120.0  # the server holds a barrier's ack this long at most
FRAME_ROWS = 256  # messages per batch frame (the server takes up to 1000)
FRAME_BYTES = 64 * 1024  # a batch frame stays under this (a bigger message travels alone)
# Acknowledged messages leave the outbox in one transaction per this many seconds (at once
# while a flush waits): each transaction writes pages of the outbox file (measured: ~35 µs of
# CPU, as much for one message as for a hundred).
COMMIT_EVERY = 0.05


class AckOverdue(Exception):
    """The server has not answered in time: the session is dropped (Connection.check_overdue)."""


@dataclass
class Frame:
    """A frame awaiting its reply: its messages, bytes, when it was sent, and whether it holds
    a barrier (whose ack the server may hold until the run is aggregated)."""

    ids: list[str]
    size: int
    sent: float
    barrier: bool


class Connection:
    """Sends `outbox` to the server of `target` and applies its replies."""

    def __init__(self, target: RunTarget, options: SenderOptions, outbox: Outbox,
                 waiters: FlushWaiters, books: Bookkeeping, *, new_messages: asyncio.Event,
                 cap_batch_bytes: Callable[[int], None],
                 labels_as_lists: Callable[[], None] = lambda: None) -> None:
        self.target = target
        self.options = o = options
        self.outbox = outbox
        self.waiters = waiters
        self.books = books
        self.new_messages = new_messages  # set when the outbox has messages to send
        self.cap_batch_bytes = cap_batch_bytes
        self.seal_labels_as_lists = labels_as_lists  # (for a server older than coded labels)
        self.fatal: str | None = None  # why sending stopped for good
        self.connected = False
        self.in_flight: collections.OrderedDict[str, Row] = collections.OrderedDict()
        self.in_flight_bytes = 0
        self.cursor = 0  # the outbox seq of the last message sent in this session
        # the frames awaiting their reply, oldest first
        self.frames: collections.deque[Frame] = collections.deque()
        self.last_reply = 0.0  # monotonic time of the session's latest reply
        self.heartbeats = 0
        self.frame_bytes = min(FRAME_BYTES, o.max_message_bytes)
        self.done_ids: list[str] = []
        self.commit_scheduled = False
        self.max_message_bytes = o.max_message_bytes
        self.rate = float(o.max_messages_per_second)
        self.rate_tokens, self.rate_stamp = min(self.rate, 500.0), time.monotonic()
        self.session_acks = 0

    def forget_in_flight(self) -> None:
        """Everything sent but unacknowledged will be sent again from the outbox start."""
        self.in_flight.clear()
        self.frames.clear()
        self.in_flight_bytes = self.cursor = 0

    # ---------------------------------------------------------------- sessions

    async def run(self) -> None:
        """Connect and stream until a fatal refusal, reconnecting with capped exponential
        backoff (reset after a session that got acks or lasted more than 10 s)."""
        attempt = 0
        while self.fatal is None:
            started, self.session_acks = time.monotonic(), 0
            await self.connect_once()
            if self.fatal is not None:
                return
            if self.session_acks or time.monotonic() - started > 10:
                attempt = 0
            delay = min(self.options.backoff_max, self.options.backoff_initial * 2 ** attempt)
            attempt = min(attempt + 1, 30)
            self.books.count("reconnects")
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))

    async def connect_once(self) -> None:
        """One connection attempt and, when it opens, one session until it ends."""
        from websockets.asyncio.client import connect as ws_connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI

        o, url = self.options, self.target.url
        headers = {"Authorization": f"Bearer {self.target.token}"}
        try:
            async with ws_connect(url, additional_headers=headers,
                                  open_timeout=o.open_timeout, close_timeout=1.0,
                                  compression=o.compression,
                                  proxy=None if o.proxy is False else o.proxy,
                                  user_agent_header="telescope-trainer-hooks") as ws:
                self.connected = True
                self.books.count("connects")
                await self.session(ws)
        except ConnectionClosed as exc:
            self.on_closed(exc.rcvd.code if exc.rcvd else None, exc)
        except AckOverdue as exc:
            self.note_failure(f"acknowledgements overdue: {exc}")
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                self.stop_for_good(f"the server refused the ingest token (HTTP {status})")
            else:
                self.note_failure(f"HTTP {status} from {url}")
        except InvalidURI as exc:
            self.stop_for_good(f"bad URL: {exc}")
        except Exception as exc:  # noqa: BLE001 - OSError, timeouts, handshake: retry
            self.note_failure(f"{type(exc).__name__}: {exc}")
        finally:
            self.connected = False
            self.forget_in_flight()

    async def session(self, ws: Any) -> None:
        self.last_reply = time.monotonic()
        tasks = [asyncio.create_task(self.sender(ws)), asyncio.create_task(self.receiver(ws)),
                 asyncio.create_task(self.heartbeat(ws))]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for t in done:
            t.result()

    # ---------------------------------------------------------------- sending

    async def sender(self, ws: Any) -> None:
        while True:
            self.new_messages.clear()
            rows = self.next_rows()
            if not rows:
                await self.new_messages.wait()
                continue
            for frame in self.frames_of(rows):
                if len(frame) == 1 and len(frame[0].body) > self.max_message_bytes:
                    self.split(frame[0], "larger than max_message_bytes="
                               f"{self.max_message_bytes}")
                    break  # the halves go to the end of the outbox; fetch again
                await self.take_token()
                size = 0
                for row in frame:
                    self.in_flight[row.msg_id] = row
                    size += len(row.body)
                self.in_flight_bytes += size
                self.frames.append(Frame([row.msg_id for row in frame], size, time.monotonic(),
                                         any(row.kind == "barrier" for row in frame)))
                self.cursor = frame[-1].seq
                self.mark_sent(frame[-1].seq)
                await ws.send(frame_bytes(frame))
                self.books.count("sent", len(frame))
                self.books.count("frames")
                self.books.count("bytes_sent", size)

    def mark_sent(self, seq: int) -> None:
        """Record in the outbox that messages up to `seq` leave now (outbox.mark_sent)."""
        try:
            self.outbox.mark_sent(seq)
        except sqlite3.Error as exc:  # only a crash's bookkeeping is at stake: send anyway
            self.books.count("spool_errors")
            self.books.warn_once("mark_sent", "telescope: outbox write failed: %s", exc)

    def frames_of(self, rows: list[Row]) -> list[list[Row]]:
        """Consecutive rows of one format packed into frames of at most FRAME_ROWS rows and
        `frame_bytes` bytes; a bigger row travels alone."""
        frames: list[list[Row]] = []
        size = 0
        for row in rows:
            last = frames[-1] if frames else None
            n = len(row.body)
            if last is not None and last[0].fmt == row.fmt and len(last) < FRAME_ROWS \
                    and size + n <= self.frame_bytes:
                last.append(row)
                size += n
            else:
                frames.append([row])
                size = n
        return frames

    def next_rows(self) -> list[Row]:
        room = self.options.max_in_flight - len(self.frames)
        budget = self.options.max_in_flight_bytes - self.in_flight_bytes
        if room <= 0 or (self.in_flight and budget <= 0):
            return []
        rows = self.outbox.pending(self.cursor, room * FRAME_ROWS, max(budget, 1))
        if self.in_flight and rows and len(rows[0].body) > budget:
            return []  # wait for acks: only an empty window takes an oversized message
        return rows

    async def take_token(self) -> None:
        """Client-side rate limit, below the server's (close 4429)."""
        now = time.monotonic()
        burst = max(1.0, min(self.rate, 500.0))
        self.rate_tokens = min(burst, self.rate_tokens + (now - self.rate_stamp) * self.rate)
        self.rate_stamp = now
        if self.rate_tokens < 1:
            await asyncio.sleep((1 - self.rate_tokens) / self.rate)
            self.rate_tokens, self.rate_stamp = 1.0, time.monotonic()
        self.rate_tokens -= 1

    # ---------------------------------------------------------------- receiving

    async def receiver(self, ws: Any) -> None:
        while True:
            try:  # (cancelling recv loses nothing: websockets' asyncio connection)
                data = await asyncio.wait_for(ws.recv(), 1.0)
            except TimeoutError:
                self.check_overdue()
                continue
            self.last_reply = time.monotonic()
            try:
                reply = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(reply, dict) and str(reply.get("id")).startswith(HEARTBEAT_PREFIX):
                continue  # a heartbeat's: no frame of the outbox
            if self.frames:
                self.frames.popleft()  # replies come frame by frame, in order
            for one in reply if isinstance(reply, list) else [reply]:
                if isinstance(one, dict):
                    self.on_reply(one)

    def check_overdue(self) -> None:
        """Raise AckOverdue when the oldest frame awaiting its reply is overdue (see the module
        docstring): the session ends and its messages are sent again on a new one."""
        if not self.frames:
            return
        oldest = self.frames[0]
        waited = time.monotonic() - max(oldest.sent, self.last_reply)
        allowed = self.options.ack_timeout + (BARRIER_WAIT if oldest.barrier else 0.0)
        if waited > allowed:
            self.books.count("ack_timeouts")
            self.books.warn_once("ack_timeout", "telescope: no reply from %s for %.0f s to %d "
                                 "unacknowledged messages; reconnecting to send them again",
                                 self.target.url, waited, len(self.in_flight))
            raise AckOverdue(f"no reply for {waited:.0f} s")

    async def heartbeat(self, ws: Any) -> None:
        """Tell the server the trainer is alive, every HEARTBEAT_SECONDS while connected."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            self.heartbeats += 1
            message = {"v": 1, "id": f"{HEARTBEAT_PREFIX}{self.heartbeats}", "type": "heartbeat",
                       "run": self.target.run}
            if self.outbox.incarnation:
                message["incarnation"] = self.outbox.incarnation
            body = encode(message, self.options.encoding)
            await ws.send(body if self.options.encoding == "msgpack" else body.decode())

    def on_reply(self, reply: dict[str, Any]) -> None:
        books = self.books
        mid, kind = reply.get("id"), reply.get("type")
        row = self.in_flight.pop(mid, None) if isinstance(mid, str) else None
        if row is None and kind == "error" and mid is None and self.in_flight:
            row = self.in_flight.pop(next(iter(self.in_flight)))  # in order: the oldest
        if row is None:
            return
        self.in_flight_bytes -= len(row.body)
        if kind == "error" and (self.text_as_lists(row, reply)
                                or self.labels_as_lists(row, reply)):
            return
        self.done_ids.append(row.msg_id)
        if kind == "ack":
            self.session_acks += 1
            books.count("acked")
            books.count("duplicates", bool(reply.get("duplicate")))
            if row.kind == "run.start":
                self.target.opened(reply)
            for field, why in (reply.get("left_out") or {}).items():
                books.count("invalid_values")
                books.ledger.add("left out by the server", f"{describe(row)}: {field}", 1,
                                 str(why))
                books.warn_once(("left_out", field), "telescope: the server left out %s: %s",
                                field, why)
        else:
            books.count("rejected")
            code, field = reply.get("code"), reply.get("field")
            books.ledger.add("rejected by the server", describe(row), row.n or 1,
                             f"{code} (field {field}): {reply.get('message')}")
            books.warn_once(("error", code, field), "telescope: the server rejected a %s "
                            "message (%s, field %s): %s; dropped (logged once per code and "
                            "field)", row.kind, code, field, reply.get("message"))
        self.new_messages.set()  # (room in the window: the sender goes on at once)
        if not self.commit_scheduled:
            self.commit_scheduled = True
            loop = asyncio.get_running_loop()
            if self.waiters.waiting:  # a flush waits for them to leave the outbox
                loop.call_soon(self.commit_done)
            else:  # one outbox transaction for the acks of COMMIT_EVERY seconds
                loop.call_later(COMMIT_EVERY, self.commit_done)

    def commit_done(self) -> None:
        """Forget acknowledged / rejected messages in one outbox transaction (`on_reply`
        schedules it; the engine calls it at once for a new flush, and when it stops)."""
        self.commit_scheduled = False
        ids, self.done_ids = self.done_ids, []
        try:
            self.outbox.delete(ids)
        except sqlite3.Error as exc:
            self.books.count("spool_errors")
            self.books.warn_once("delete", "telescope: outbox delete failed: %s", exc)
        self.waiters.check()
        self.new_messages.set()

    # ---------------------------------------------------------------- refusals

    def stop_for_good(self, reason: str) -> None:
        """Stop sending (a refused token, a bad URL); the outbox is kept for a later client."""
        self.fatal = reason
        log.error("telescope: %s; nothing more will be sent to %s. Messages stay in the "
                  "outbox %s and are replayed by a later client of this run with the same "
                  "token once the server accepts it.", reason, self.target.url,
                  self.outbox.path)
        self.waiters.fail_all()

    def on_closed(self, code: int | None, exc: Exception) -> None:
        if code == CLOSE_BAD_TOKEN:
            self.stop_for_good("the server refused the ingest token (close 4401)")
        elif code == CLOSE_TOO_LARGE:
            # The refused frame is not named, nor always the oldest awaiting its reply (a
            # server may read on before it applies): the largest of them is too large.
            largest = max(self.frames, key=lambda f: f.size) if self.frames else None
            ids, size = (largest.ids, largest.size) if largest else ([], 0)
            row = self.in_flight.get(ids[0]) if len(ids) == 1 else None
            if len(ids) > 1:  # a batch frame was too big: smaller frames, nothing to split
                self.frame_bytes = max(1, size // 2)
                self.books.warn_once("4413-frame", "telescope: the server refused a batch "
                                     "frame as too large (close 4413); frames of at most %d "
                                     "bytes now", self.frame_bytes)
            elif row is not None:
                self.max_message_bytes = min(self.max_message_bytes, len(row.body) - 1)
                self.cap_batch_bytes(self.max_message_bytes // 2)
                self.split(row, "refused by the server as too large (close 4413)")
        elif code == CLOSE_RATE_LIMITED:
            self.rate = max(1.0, self.rate / 2)
            self.books.warn_once("4429", "telescope: the server rate-limited this client "
                                 "(close 4429); sending at most %.0f messages/s", self.rate)
        else:
            self.note_failure(f"connection closed ({code}): {exc}")

    def text_as_lists(self, row: Row, reply: dict[str, Any]) -> bool:
        """A server older than packed text (`trainer_hooks.wire.texts`) refuses a packed text
        column as a wrong type: the message goes again (to the end of the outbox, same id:
        the refusal stored nothing) with its text as lists of strings, so its samples are not
        lost. True when it was requeued so."""
        if reply.get("field") not in TEXT_COLUMNS or row.fmt != "msgpack":
            return False
        try:
            message = decode_frame(row.body, binary=True)
        except ProtocolError:
            return False
        if not isinstance(message, dict) or not unpack_text(message):
            return False  # (sent as lists already: refused for another reason)
        self.send_again(row, encode(message, row.fmt, pack_text=False))
        self.books.count("text_as_lists")
        self.books.warn_once("text_as_lists", "telescope: the server refused packed sample "
                             "text (%s); messages with text are sent again with it as lists "
                             "of strings (an older server: upgrade it)", reply.get("message"))
        return True

    def labels_as_lists(self, row: Row, reply: dict[str, Any]) -> bool:
        """A server older than dictionary-encoded sample labels (`env`, `stop_reason`,
        `discard_reason` as `{"values", "codes"}`) refuses such a column as a wrong type: the
        message goes again (as `text_as_lists`: same id, to the end of the outbox) with those
        columns as lists, and the batcher seals lists from now on (`labels_as_lists`), so
        only what was sealed before is refused once. True when it was requeued so."""
        if reply.get("code") != "wrong_type" or reply.get("field") not in LABEL_COLUMNS \
                or row.kind != "samples":
            return False
        try:
            message = decode_frame(row.body, binary=row.fmt == "msgpack")
        except ProtocolError:
            return False
        if not isinstance(message, dict) or not unpack_labels(message):
            return False  # (sent as lists already: refused for another reason)
        packed = unpack_text(message)  # (its text stays as it was sent)
        self.send_again(row, encode(message, row.fmt, pack_text=packed))
        self.seal_labels_as_lists()
        self.books.count("labels_as_lists")
        self.books.warn_once("labels_as_lists", "telescope: the server refused a "
                             "dictionary-encoded sample label column (%s); samples are sent "
                             "again and from now on with env, stop_reason and discard_reason "
                             "as lists (an older server: upgrade it)", reply.get("message"))
        return True

    def send_again(self, row: Row, body: bytes) -> None:
        """The message of `row` again, as `body` (same id: its refusal stored nothing), at
        the end of the outbox (the sender woken to send it: nothing else may, a flush
        waiting for it)."""
        self.outbox.replace(row.msg_id, [Outgoing(row.msg_id, row.kind, row.n, row.fmt, body)])
        self.waiters.requeued()
        self.waiters.check()
        self.new_messages.set()

    def split(self, row: Row, why: str) -> None:
        """Halve a message that is too large (its halves go to the end of the outbox), or
        drop one that cannot be split."""
        parts = split_message(decode(row.body, row.fmt))
        if parts is None:
            self.outbox.delete([row.msg_id])
            self.books.count("dropped_too_large")
            self.books.ledger.add("too large", describe(row), row.n or 1,
                                  f"{len(row.body)} bytes, {why}, and it cannot be split")
            log.warning("telescope: a %s message (%d bytes) was %s and cannot be split; "
                        "dropped", row.kind, len(row.body), why)
        else:
            self.outbox.replace(row.msg_id, [
                Outgoing(p["id"], row.kind, len(p.get("reward", ())), row.fmt,
                         encode(p, row.fmt)) for p in parts])
            self.books.count("splits")
            self.books.warn_once(("split", why), "telescope: a %s message was %s; split in "
                                 "halves", row.kind, why)
        self.waiters.requeued()
        self.waiters.check()

    def note_failure(self, what: str) -> None:
        self.books.warn_once(("conn", what.split(":")[0]), "telescope: cannot reach %s (%s); "
                             "retrying with backoff, messages wait in the outbox",
                             self.target.url, what)


def frame_bytes(frame: list[Row]) -> bytes | str:
    """One message as it is, several as a batch: a msgpack array (binary frame) or a JSON
    array (text frame) of the already encoded bodies, without decoding them."""
    if len(frame) == 1:
        row = frame[0]
        return row.body if row.fmt == "msgpack" else row.body.decode()
    if frame[0].fmt == "msgpack":
        header: bytes = msgpack.Packer().pack_array_header(len(frame))
        return header + b"".join(r.body for r in frame)
    return (b"[" + b",".join(r.body for r in frame) + b"]").decode()


def describe(row: Row) -> str:
    """What an outbox message holds, for the ledger of values not stored."""
    try:
        msg = decode(row.body, row.fmt)
    except Exception:  # noqa: BLE001
        return f"a {row.kind} message"
    step = msg.get("step")
    if row.kind == "samples":
        steps = f"steps {min(step)}–{max(step)}" if isinstance(step, list) else f"step {step}"
        env = msg.get("env")
        env = env.get("values") if isinstance(env, dict) else env  # (dictionary-encoded)
        return f"{row.n} samples of {steps} (env {env!r:.60})"
    if row.kind == "step":
        keys = list(msg.get("metrics") or {})
        return f"step {step}: {len(keys)} metrics ({', '.join(keys[:5])[:120]})"
    return f"a {row.kind} message"
