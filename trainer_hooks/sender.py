"""`connect()`: the durable, non-blocking sender (PROTOCOL.md §1, §7).

    client = connect("ws://127.0.0.1:8000", token, run="grpo-1", config=cfg,
                     environments="envs.yaml")
    client.log_step(step, reduced)                      # a dict of numbers
    client.log_samples(step, sample_id=ids, group_id=gids, reward=rewards, env="countdown",
                       metrics={"correct": correct}, completion_tokens=lengths)
    client.log_rewards(step, results, sample_id=ids, group_id=gids, env="countdown")
    client.close(timeout=10.0, status="finished")       # True: everything acknowledged

**Who sends.** Only one process per run needs a client for step metrics: with data parallelism,
reduce on every rank (`reduce_window(window, dst=0)`) and call `log_step` on rank 0 only (the
other ranks get None). Reward workers (separate processes or machines) each open their own
client to the *same run name* and send only samples; the server merges messages from any number
of clients. Only the run's owner passes `status=` to `close` (or calls `end`).

**Threading.** `log_*` only append a tuple to a deque (`log_step` copies its dict; sample
columns are taken by reference and read on the sender thread within `poll_interval`, so pass
fresh ones or connect with `copy_columns=True`): no validation, encoding, I/O or lock on the
caller's thread, and no exception escapes (a problem is logged once and counted in
`client.stats`). A daemon thread runs its own asyncio loop:
every `poll_interval` it drains the deque, validates and converts the values (numpy), batches
samples columnar (`max_batch_samples` / `max_batch_bytes`, sealed at least every
`flush_interval`), gives every message a unique id (`<12 hex of a uuid4>-<counter>`) and writes
it to the on-disk outbox (`trainer_hooks.spool`, SQLite) *before* sending. The sender task
pipelines messages in outbox order (at most `max_in_flight` unacknowledged, client-side rate
limit), the receiver task matches acks and error replies by id and deletes those messages from
the outbox. On a lost connection everything unacknowledged is resent in order, with its
original id, after a capped exponential backoff with jitter; the server acks a repeat as a
duplicate and applies nothing twice.

**Restarts.** A new process with the same spool directory and run name replays the previous
process's unacknowledged messages first (original ids). It also remembers which samples the
previous process had sealed (the last `dedupe_steps` steps): samples re-logged after resuming
from a checkpoint are dropped instead of being counted twice (`stats["deduped_samples"]`).
`client.sync()` returns once everything logged so far is in the outbox; call it before writing
a checkpoint and a crash loses nothing logged before the checkpoint.

**Server answers.** An error reply drops that message (logged once per code and field, never
retried). Close 4401 (bad token) stops sending for good, keeping the outbox for a later run with
a valid token; 4413 splits the refused message in halves (or drops an unsplittable one) and
lowers the batch size; 4429 halves the client's message rate and backs off.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import itertools
import logging
import math
import operator
import random
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import orjson

from trainer_hooks import spool as spool_mod
from trainer_hooks.envconfig import environment_declarations
from trainer_hooks.protocol import MAX_METRICS_PER_MESSAGE, VERSION, ProtocolError, check_key
from trainer_hooks.rewards import (
    Batch,
    RewardRecorder,
    SampleBatcher,
    SampleChunk,
    SampleError,
    identity_record,
    make_chunk,
    results_to_columns,
)
from trainer_hooks.spool import Outgoing, Row

log = logging.getLogger("trainer_hooks.sender")

CLOSE_BAD_TOKEN, CLOSE_TOO_LARGE, CLOSE_RATE_LIMITED = 4401, 4413, 4429
_STEP, _SAMPLES, _REWARDS, _CONTROL, _FLUSH, _SYNC, _STOP = range(7)
_OPTIONAL = ("advantage", "prompt_tokens", "completion_tokens", "stop_reason",
             "off_policy_steps", "discard_reason")
_PUMP_BATCH = 2000  # entries handled per pump pass, so acks keep flowing under a flood
STAT_NAMES = (
    "logged_steps", "logged_samples", "sent", "bytes_sent", "acked", "duplicates", "rejected",
    "connects", "reconnects", "splits", "replayed", "deduped_samples", "invalid_calls",
    "invalid_values", "dropped_queue_full", "dropped_closed", "dropped_spool_full",
    "dropped_too_large", "spool_errors", "internal_errors",
)
_LOSSES = ("invalid_calls", "dropped_queue_full", "dropped_closed", "dropped_spool_full",
           "dropped_too_large", "rejected")


@dataclass
class SenderOptions:
    """`connect(**options)`; sizes in bytes, times in seconds."""

    spool_dir: str | Path | None = None  # default $TELESCOPE_SPOOL_DIR or ~/.cache/telescope/spool
    spool: bool = True  # False: the outbox lives in memory (nothing survives a crash)
    spool_name: str | None = None  # a stable slot name per worker of a run on one machine
    encoding: str = "msgpack"  # or "json" (text frames)
    max_batch_samples: int = 4096
    max_batch_bytes: int = 512 * 1024
    flush_interval: float = 0.5
    max_in_flight: int = 32
    max_in_flight_bytes: int = 8 << 20
    max_message_bytes: int = 4 << 20
    max_queue: int = 4096  # log calls waiting for the sender thread; more are dropped
    copy_columns: bool = False  # True: log_samples copies its columns (safe with reused
    # buffers; costs one copy per column on the caller's thread)
    max_spool_bytes: int = 1 << 30
    max_messages_per_second: float = 1000.0
    backoff_initial: float = 0.25
    backoff_max: float = 10.0
    open_timeout: float = 10.0
    poll_interval: float = 0.05
    dedupe_steps: int = 10_000  # 0: no restart de-duplication of samples
    fsync: bool = False  # True: survive power loss too, at an fsync per outbox write
    atexit_timeout: float = 2.0
    compression: str | None = None
    proxy: str | bool | None = True


def connect(url: str, token: str, run: str, config: dict[str, Any] | None = None,
            environments: Any = None, **options: Any) -> Client:
    """Start a sender for `run`; see the module docstring. Raises only for a malformed
    `url` or run name or an unknown option (setup mistakes), never for the network."""
    return Client(url, token, run, config=config, environments=environments,
                  options=SenderOptions(**options))


def ingest_url(url: str) -> str:
    """`ws://host:port` (or http) → `ws://host:port/ws/ingest/`; a given path is kept."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss") or not parts.netloc:
        raise ValueError(f"not a ws:// or http:// URL: {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/ws/ingest/"
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def _keep(x: Any) -> Any:
    return x


def _copy(x: Any) -> Any:
    """A copy of a list, array or tensor column (`copy_columns=True`)."""
    if type(x) is list or type(x) is np.ndarray:
        return x.copy()
    if hasattr(x, "detach") and hasattr(x, "clone"):
        return x.detach().clone()
    return x


class _Waiter:
    __slots__ = ("event", "ok", "target")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.ok = False
        self.target = 0

    def resolve(self, ok: bool) -> None:
        self.ok = ok
        self.event.set()

    def wait(self, timeout: float | None) -> bool:
        return self.event.wait(timeout) and self.ok


class Client:
    """A connection to one run. `log_*` are safe to call from any thread."""

    def __init__(self, url: str, token: str, run: str, *, config: dict[str, Any] | None,
                 environments: Any, options: SenderOptions) -> None:
        check_key(run, "run", kind="run name")
        if options.encoding not in ("msgpack", "json"):
            raise ValueError("encoding must be 'msgpack' or 'json'")
        self.url = ingest_url(url)
        self.run = run
        self.options = options
        self._snap = _copy if options.copy_columns else _keep
        self._queue: collections.deque[tuple[Any, ...]] = collections.deque()
        self._closed = False
        self._close_result: bool | None = None
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(("dropped_queue_full", "dropped_closed", "invalid_calls"), 0)
        self._warned: set[str] = set()
        self._recorders: list[RewardRecorder] = []
        self._engine = _Engine(self, token)
        self._thread = threading.Thread(target=self._engine.run, daemon=True,
                                        name=f"telescope-sender[{run}]")
        self._thread.start()
        self._engine.started.wait(30)
        if config is not None or environments is not None:
            self._run_start(config, environments)
        atexit.register(self._atexit)

    # ---------------------------------------------------------------- logging (caller thread)

    def log_step(self, step: int, metrics: Any = None, *, time: float | None = None) -> None:
        """Queue one step's metrics ({key: number or None}). Never blocks, never raises."""
        try:
            self._put((_STEP, step, dict(metrics), _now() if time is None else time))
        except Exception as exc:  # noqa: BLE001
            self._caller_problem("log_step", exc)

    def log_samples(self, step: Any, *, sample_id: Any = None, group_id: Any = None,
                    reward: Any = None, env: Any = None, metrics: Any = None,
                    advantage: Any = None, prompt_tokens: Any = None,
                    completion_tokens: Any = None, stop_reason: Any = None,
                    off_policy_steps: Any = None, discard_reason: Any = None,
                    time: Any = None) -> None:
        """Queue N samples, columnar (lists, numpy arrays or tensors of length N; `step`,
        `env`, `group_id`, string and optional columns may be one scalar for all). Never
        blocks, never raises: a bad call is logged once and counted (`invalid_calls`).

        The columns are read on the sender thread shortly after the call (within
        `poll_interval`), not copied: pass fresh lists / arrays / tensors, or do not modify
        them in place afterwards (or connect with `copy_columns=True`)."""
        snap = self._snap
        try:
            self._put((
                _SAMPLES, step, snap(sample_id), snap(group_id), snap(reward), env,
                None if metrics is None else {k: snap(v) for k, v in metrics.items()},
                (snap(advantage), snap(prompt_tokens), snap(completion_tokens),
                 snap(stop_reason), snap(off_policy_steps), snap(discard_reason)),
                _now() if time is None else snap(time)))
        except Exception as exc:  # noqa: BLE001
            self._caller_problem("log_samples", exc)

    def log_rewards(self, step: Any, results: Any, *, sample_id: Any = None,
                    group_id: Any = None, env: Any = None, **columns: Any) -> None:
        """Queue `RewardResult`s (reward + sample metrics) with their samples' identity and
        any optional columns; converted to columns on the sender thread."""
        try:
            snap = self._snap
            self._put((_REWARDS, step, list(results), snap(sample_id), snap(group_id), env,
                       {k: snap(v) for k, v in columns.items()}, _now()))
        except Exception as exc:  # noqa: BLE001
            self._caller_problem("log_rewards", exc)

    def declare_ranges(self, environments: Any) -> None:
        """Replace the run's environment declarations (a YAML path, dicts or env classes)."""
        decls, problems = environment_declarations(environments)
        self._count("invalid_calls", len(problems))
        self._put((_CONTROL, {"type": "ranges", "environments": decls}))

    def reward_recorder(self, env: str | None = None, **kwargs: Any) -> RewardRecorder:
        """A `RewardRecorder` feeding this client; `flush()` and `close()` flush it first."""
        rec = RewardRecorder(self, env, **kwargs)
        self._recorders.append(rec)
        return rec

    def end(self, status: str = "finished") -> None:
        """Queue `run.end` (only the run's owner should)."""
        self._put((_CONTROL, {"type": "run.end", "status": status, "time": _now()}))

    # ---------------------------------------------------------------- waiting

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Send everything logged so far; True when all of it is acknowledged and nothing was
        lost (dropped, rejected) since the previous flush. Waits at most `timeout`."""
        if self._close_result is not None:
            return self._close_result
        for rec in list(self._recorders):
            rec.flush()
        return self._wait(_FLUSH, timeout)

    def sync(self, timeout: float | None = 10.0) -> bool:
        """True once everything logged so far is in the outbox (on disk, unless `spool=False`)
        or acknowledged: what a checkpoint needs."""
        if self._close_result is not None:
            return self._close_result
        return self._wait(_SYNC, timeout)

    def _wait(self, tag: int, timeout: float | None) -> bool:
        if not self._thread.is_alive():
            return False
        waiter = _Waiter()
        self._queue.append((tag, waiter))  # never refused: not bounded by max_queue
        self._engine.kick()
        return waiter.wait(timeout)

    def close(self, timeout: float | None = 10.0, *, status: str | None = None) -> bool:
        """Flush (at most `timeout`), then stop the sender thread; returns what `flush`
        returned. `status="finished"|"failed"` also ends the run. Idempotent."""
        if self._close_result is not None:
            return self._close_result
        deadline = None if timeout is None else time.monotonic() + timeout
        if status is not None:
            self.end(status)
        ok = self.flush(timeout)
        self._closed = True
        self._queue.append((_STOP,))
        self._engine.kick()
        left = None if deadline is None else max(0.0, deadline - time.monotonic()) + 5.0
        self._thread.join(left)
        atexit.unregister(self._atexit)
        self._close_result = ok
        return ok

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _atexit(self) -> None:
        self.close(self.options.atexit_timeout)

    # ---------------------------------------------------------------- state

    @property
    def stats(self) -> dict[str, int]:
        """Counters (see STAT_NAMES) plus `pending` (outbox messages not yet acknowledged),
        `in_flight`, `spool_bytes` and `connected` (0/1)."""
        out = dict(self._engine.counts)
        for k, v in self._counts.items():
            out[k] += v
        e = self._engine
        out.update(pending=e.spool.rows if e.spool else 0, in_flight=len(e.in_flight),
                   spool_bytes=e.spool.bytes if e.spool else 0, connected=int(e.connected))
        return out

    @property
    def spool_path(self) -> Path | None:
        return self._engine.spool.path if self._engine.spool else None

    # ---------------------------------------------------------------- internals

    def _put(self, entry: tuple[Any, ...]) -> None:
        if self._closed:
            self._count("dropped_closed", 1)
        elif len(self._queue) >= self.options.max_queue:
            self._count("dropped_queue_full", 1)
            self._warn_once("queue", "telescope: the sender queue is full (max_queue=%d); "
                            "dropping log calls (counted in stats)", self.options.max_queue)
        else:
            self._queue.append(entry)

    def _count(self, name: str, n: int) -> None:
        if n:
            with self._lock:
                self._counts[name] += n

    def _caller_problem(self, where: str, exc: Exception) -> None:
        self._count("invalid_calls", 1)
        self._warn_once(where, "telescope: %s ignored a bad call (counted in stats, logged "
                        "once): %s: %s", where, type(exc).__name__, exc)

    def _warn_once(self, key: str, msg: str, *args: Any) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        log.warning(msg, *args)

    def _run_start(self, config: Any, environments: Any) -> None:
        msg: dict[str, Any] = {"type": "run.start"}
        if config is not None:
            try:
                msg["config"] = orjson.loads(orjson.dumps(
                    config, default=str,
                    option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
            except (TypeError, orjson.JSONEncodeError) as exc:
                self._caller_problem("config", exc)
        if environments is not None:
            decls, problems = environment_declarations(environments)
            self._count("invalid_calls", len(problems))
            msg["environments"] = decls
        self._put((_CONTROL, msg))


_now = time.time


class _Engine:
    """The sender thread: pump (deque → outbox) and connection (outbox → server) tasks on one
    event loop. Everything here runs on that thread, except `kick` and reading `counts`."""

    def __init__(self, client: Client, token: str) -> None:
        self.c = client
        self.o = o = client.options
        self.token = token
        self.started = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.counts = dict.fromkeys(STAT_NAMES, 0)
        self.prefix = uuid.uuid4().hex[:12]
        self.counter = itertools.count()
        self.batcher = SampleBatcher(o.max_batch_samples, o.max_batch_bytes)
        self.spool: spool_mod.Spool | None = None
        self.fatal: str | None = None
        self.connected = False
        self.in_flight: collections.OrderedDict[str, Row] = collections.OrderedDict()
        self.in_flight_bytes = 0
        self.cursor = 0
        self.flush_waiters: list[_Waiter] = []
        self.done_ids: list[str] = []
        self.commit_scheduled = False
        self.valid_keys: set[str] = set()
        self.prev_keys: dict[int, set[tuple[str, str, str]]] = {}
        self.max_step = -1
        self.appends = 0
        self.losses_seen = 0
        self.max_message_bytes = o.max_message_bytes
        self.rate = float(o.max_messages_per_second)
        self.tokens, self.token_stamp = min(self.rate, 500.0), time.monotonic()
        self.session_acks = 0
        self.warned: set[Any] = set()

    # ---------------------------------------------------------------- lifecycle

    def run(self) -> None:
        try:
            with asyncio.Runner() as runner:
                runner.run(self.main())
        except Exception:  # noqa: BLE001 - the thread must end quietly, the caller keeps going
            log.exception("telescope: the sender thread failed; nothing more will be sent")
        finally:
            self.started.set()
            self.resolve_all(False)

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.kick_event = asyncio.Event()
        self.send_event = asyncio.Event()
        self.open_spool()
        self.started.set()
        conn = asyncio.create_task(self.connection_loop())
        try:
            await self.pump_loop()
        finally:
            conn.cancel()
            await asyncio.gather(conn, return_exceptions=True)
            self.resolve_all(False)
            if self.spool is not None:
                self.spool.close()

    def kick(self) -> None:
        """Wake the pump now (any thread)."""
        loop = self.loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self.kick_event.set)
            except RuntimeError:  # the loop is closed
                pass

    def open_spool(self) -> None:
        o = self.o
        try:
            if o.spool:
                base = Path(o.spool_dir) if o.spool_dir else spool_mod.default_dir()
                self.spool = spool_mod.open_slot(base, self.c.run, name=o.spool_name,
                                                 fsync=o.fsync)
            else:
                self.spool = spool_mod.Spool(None)
        except (OSError, sqlite3.Error) as exc:
            log.warning("telescope: cannot open the outbox (%s); keeping messages in memory "
                        "only", exc)
            self.counts["spool_errors"] += 1
            self.spool = spool_mod.Spool(None)
        self.counts["replayed"] = self.spool.rows
        if self.spool.rows:
            log.info("telescope: replaying %d unacknowledged messages from %s",
                     self.spool.rows, self.spool.path)

    def warn_once(self, key: Any, msg: str, *args: Any, level: int = logging.WARNING) -> None:
        if key not in self.warned:
            self.warned.add(key)
            log.log(level, msg, *args)

    # ---------------------------------------------------------------- pump: deque → outbox

    async def pump_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.kick_event.wait(), self.o.poll_interval)
            except TimeoutError:
                pass
            self.kick_event.clear()
            if self.pump_once():
                return

    def pump_once(self) -> bool:
        """Seal what the caller queued into the outbox; True when asked to stop."""
        out: list[Outgoing] = []
        syncs: list[_Waiter] = []
        flushes: list[_Waiter] = []
        stop = False
        queue = self.c._queue
        for _ in range(_PUMP_BATCH):
            if not queue:
                break
            entry = queue.popleft()
            tag = entry[0]
            try:
                if tag == _STEP:
                    self.seal_step(entry, out)
                elif tag in (_SAMPLES, _REWARDS):
                    self.add_samples(entry, out)
                elif tag == _CONTROL:
                    self.seal_pending(out)
                    self.seal_message(entry[1], out)
                else:
                    self.seal_pending(out)
                    if tag == _FLUSH:
                        flushes.append(entry[1])
                    elif tag == _SYNC:
                        syncs.append(entry[1])
                    elif tag == _STOP:
                        stop = True
            except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the sender
                self.counts["internal_errors"] += 1
                self.warn_once(("internal", type(exc)), "telescope: sender error: %r", exc)
        if queue:
            self.kick_event.set()
        # sealed at most flush_interval after the first sample, whatever the poll phase
        if self.batcher.due(time.monotonic(), self.o.flush_interval - self.o.poll_interval):
            self.seal_pending(out)
        ok = self.write(out)
        for w in syncs:
            w.resolve(ok)
        for w in flushes:
            w.target = self.spool.last_seq if self.spool else 0
            self.flush_waiters.append(w)
        self.check_waiters()
        return stop

    def seal_step(self, entry: tuple[Any, ...], out: list[Outgoing]) -> None:
        _, step, metrics, t = entry
        try:
            step = _step_number(step)
        except (TypeError, ValueError) as exc:
            self.invalid("step", f"log_step: {exc}")
            return
        clean: dict[str, Any] = {}
        for key, value in metrics.items():
            if key not in self.valid_keys:
                try:
                    check_key(key, "metrics")
                except ProtocolError as exc:
                    self.counts["invalid_values"] += 1
                    self.warn_once(("key", exc.code), "telescope: step metric left out: %s",
                                   exc.message)
                    continue
                if len(self.valid_keys) < 100_000:
                    self.valid_keys.add(key)
            if value is None or type(value) is float or type(value) is int:
                clean[key] = value
                continue
            try:
                clean[key] = float(value)  # numpy / torch scalars, bools
            except (TypeError, ValueError):
                self.counts["invalid_values"] += 1
                self.warn_once(("value", key), "telescope: step metric %r is not a number "
                               "(%s); left out", key, type(value).__name__)
        if metrics and not clean:
            self.invalid("step", "log_step: no usable metric")
            return
        t = t if type(t) in (int, float) and math.isfinite(t) else _now()
        items = list(clean.items())
        for i in range(0, max(len(items), 1), MAX_METRICS_PER_MESSAGE):
            part = dict(items[i:i + MAX_METRICS_PER_MESSAGE])
            self.seal_message({"type": "step", "step": step, "metrics": part, "time": t}, out)
        self.counts["logged_steps"] += 1

    def add_samples(self, entry: tuple[Any, ...], out: list[Outgoing]) -> None:
        problems: list[str] = []
        try:
            if entry[0] == _SAMPLES:
                _, step, sid, gid, reward, env, metrics, optional, t = entry
                columns = dict(zip(_OPTIONAL, optional, strict=True))
            else:
                _, step, results, sid, gid, env, columns, t = entry
                reward, metrics = results_to_columns(results)
            chunk = make_chunk(step, sid, gid, reward, env, metrics, columns, t, problems)
        except Exception as exc:  # noqa: BLE001 - any failure converting caller data
            key = str(exc).split(":")[0] if isinstance(exc, SampleError) else type(exc).__name__
            self.invalid(key, f"log_samples: {type(exc).__name__}: {exc}")
            return
        finally:
            for p in problems:
                self.counts["invalid_values"] += 1
                self.warn_once(("column", p.split(":")[0]), "telescope: log_samples: %s", p)
        if self.dedupe:
            kept = self.drop_replayed(chunk)
            if kept is None:
                return
            chunk = kept
        top = chunk.step if isinstance(chunk.step, int) else int(chunk.step.max())
        self.max_step = max(self.max_step, top)
        for batch in self.batcher.add(chunk, time.monotonic()):
            self.seal_batch(batch, out)

    @property
    def dedupe(self) -> bool:
        return self.o.dedupe_steps > 0 and self.spool is not None and self.spool.path is not None

    def drop_replayed(self, chunk: SampleChunk) -> SampleChunk | None:
        """Leave out samples an earlier incarnation of this outbox already sealed."""
        prev = self.spool.prev_max_step if self.spool else None
        low = chunk.step if isinstance(chunk.step, int) else int(chunk.step.min())
        if prev is None or low > prev:
            return chunk
        keep = np.fromiter((step > prev or key not in self.previous_keys(step)
                            for step, key in chunk.identities()), dtype=bool, count=chunk.n)
        dropped = chunk.n - int(keep.sum())
        if dropped:
            self.counts["deduped_samples"] += dropped
            self.warn_once("dedupe", "telescope: left out samples that a previous run of this "
                           "process already logged (resumed from a checkpoint)",
                           level=logging.INFO)
        if dropped == chunk.n:
            return None
        return chunk if not dropped else chunk.take(keep)

    def previous_keys(self, step: int) -> set[tuple[str, str, str]]:
        if step not in self.prev_keys:
            assert self.spool is not None and self.spool.prev_max_step is not None
            if len(self.prev_keys) > 4096:
                self.prev_keys.clear()
            hi = min(step + 255, self.spool.prev_max_step)
            loaded = self.spool.previous_keys(step, hi)
            for s in range(step, hi + 1):
                self.prev_keys[s] = loaded.get(s, set())
        return self.prev_keys[step]

    def seal_pending(self, out: list[Outgoing]) -> None:
        if self.batcher.chunks:
            self.seal_batch(self.batcher.seal(), out)

    def seal_batch(self, batch: Batch, out: list[Outgoing]) -> None:
        ident = identity_record(batch.fields) if self.dedupe else None
        self.seal_message({"type": "samples", **batch.fields}, out, batch.n, ident)
        self.counts["logged_samples"] += batch.n

    def seal_message(self, fields_: dict[str, Any], out: list[Outgoing], n: int = 0,
                     ident: tuple[int, int, bytes] | None = None) -> None:
        mid = f"{self.prefix}-{next(self.counter)}"
        msg = {"v": VERSION, "id": mid, "run": self.c.run, **fields_}
        body = spool_mod.encode(msg, self.o.encoding)
        out.append(Outgoing(mid, msg["type"], n, self.o.encoding, body, ident))

    def invalid(self, key: str, message: str) -> None:
        self.counts["invalid_calls"] += 1
        self.warn_once(("invalid", key), "telescope: %s (dropped; counted in stats, logged "
                       "once)", message)

    def write(self, out: list[Outgoing]) -> bool:
        """Append sealed messages to the outbox; False when they had to be dropped."""
        if not out:
            return True
        assert self.spool is not None
        if self.spool.bytes > self.o.max_spool_bytes:
            self.counts["dropped_spool_full"] += len(out)
            self.warn_once("spool_full", "telescope: the outbox holds more than %d bytes "
                           "(max_spool_bytes); dropping new messages", self.o.max_spool_bytes)
            return False
        try:
            self.spool.append(out)
        except (sqlite3.Error, OSError) as exc:
            self.to_memory(out, exc)
        self.appends += 1
        if self.appends % 200 == 0 and self.o.dedupe_steps > 0:
            self.prune()
        self.send_event.set()
        return True

    def to_memory(self, out: list[Outgoing], exc: Exception) -> None:
        """The outbox file failed (disk full?): carry on with an in-memory outbox."""
        self.counts["spool_errors"] += 1
        log.error("telescope: writing the outbox failed (%s); continuing in memory only", exc)
        old, self.spool = self.spool, spool_mod.Spool(None)
        try:
            rows = old.pending(0, 1 << 62) if old else []
            if old:
                old.close()
        except sqlite3.Error:
            rows = []
        self.spool.append([Outgoing(r.msg_id, r.kind, r.n, r.fmt, r.body) for r in rows] + out)
        self.in_flight.clear()
        self.in_flight_bytes = self.cursor = 0
        for w in self.flush_waiters:
            w.target = self.spool.last_seq

    def prune(self) -> None:
        try:
            assert self.spool is not None
            self.spool.prune_keys(self.max_step - self.o.dedupe_steps)
        except sqlite3.Error as exc:
            self.warn_once("prune", "telescope: outbox pruning failed: %s", exc)

    # ---------------------------------------------------------------- waiters

    def losses(self) -> int:
        c = self.c._counts
        return sum(self.counts[k] + c.get(k, 0) for k in _LOSSES)

    def check_waiters(self) -> None:
        if not self.flush_waiters or self.spool is None:
            return
        if self.fatal is not None:
            self.resolve_all(False)
            return
        low = self.spool.min_seq()
        done = [w for w in self.flush_waiters if low is None or low > w.target]
        if done:
            lost = self.losses()
            ok, self.losses_seen = lost == self.losses_seen, lost
            self.flush_waiters = [w for w in self.flush_waiters if w not in done]
            for w in done:
                w.resolve(ok)

    def resolve_all(self, ok: bool) -> None:
        waiters, self.flush_waiters = self.flush_waiters, []
        for w in waiters:
            w.resolve(ok)

    # ---------------------------------------------------------------- connection: outbox → server

    async def connection_loop(self) -> None:
        from websockets.asyncio.client import connect as ws_connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI

        attempt = 0
        headers = {"Authorization": f"Bearer {self.token}"}
        while self.fatal is None:
            started, self.session_acks = time.monotonic(), 0
            try:
                async with ws_connect(self.c.url, additional_headers=headers,
                                      open_timeout=self.o.open_timeout, close_timeout=1.0,
                                      compression=self.o.compression, proxy=self.o.proxy,
                                      user_agent_header="telescope-trainer-hooks") as ws:
                    self.connected = True
                    self.counts["connects"] += 1
                    await self.session(ws)
            except ConnectionClosed as exc:
                self.on_closed(exc.rcvd.code if exc.rcvd else None, exc)
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403):
                    self.set_fatal(f"the server refused the ingest token (HTTP {status})")
                else:
                    self.note_failure(f"HTTP {status} from {self.c.url}")
            except InvalidURI as exc:
                self.set_fatal(f"bad URL: {exc}")
            except Exception as exc:  # noqa: BLE001 - OSError, timeouts, handshake: retry
                self.note_failure(f"{type(exc).__name__}: {exc}")
            finally:
                self.connected = False
                self.in_flight.clear()
                self.in_flight_bytes = self.cursor = 0
            if self.fatal is not None:
                return
            if self.session_acks or time.monotonic() - started > 10:
                attempt = 0
            delay = min(self.o.backoff_max, self.o.backoff_initial * 2 ** attempt)
            attempt = min(attempt + 1, 30)
            self.counts["reconnects"] += 1
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))

    async def session(self, ws: Any) -> None:
        tasks = [asyncio.create_task(self.sender(ws)), asyncio.create_task(self.receiver(ws))]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for t in done:
            t.result()

    async def sender(self, ws: Any) -> None:
        while True:
            self.send_event.clear()
            rows = self.next_rows()
            if not rows:
                await self.send_event.wait()
                continue
            for row in rows:
                if len(row.body) > self.max_message_bytes:
                    self.split(row, f"larger than max_message_bytes={self.max_message_bytes}")
                    break  # the halves go to the end of the outbox; fetch again
                await self.take_token()
                self.in_flight[row.msg_id] = row
                self.in_flight_bytes += len(row.body)
                self.cursor = row.seq
                await ws.send(row.body if row.fmt == "msgpack" else row.body.decode())
                self.counts["sent"] += 1
                self.counts["bytes_sent"] += len(row.body)

    def next_rows(self) -> list[Row]:
        room = self.o.max_in_flight - len(self.in_flight)
        budget = self.o.max_in_flight_bytes - self.in_flight_bytes
        if room <= 0 or self.spool is None or (self.in_flight and budget <= 0):
            return []
        rows = self.spool.pending(self.cursor, room, max(budget, 1))
        if self.in_flight and rows and len(rows[0].body) > budget:
            return []  # wait for acks: only an empty window takes an oversized message
        return rows

    async def take_token(self) -> None:
        """Client-side rate limit, below the server's (close 4429)."""
        now = time.monotonic()
        burst = max(1.0, min(self.rate, 500.0))
        self.tokens = min(burst, self.tokens + (now - self.token_stamp) * self.rate)
        self.token_stamp = now
        if self.tokens < 1:
            await asyncio.sleep((1 - self.tokens) / self.rate)
            self.tokens, self.token_stamp = 1.0, time.monotonic()
        self.tokens -= 1

    async def receiver(self, ws: Any) -> None:
        while True:
            data = await ws.recv()
            try:
                reply = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(reply, dict):
                self.on_reply(reply)

    def on_reply(self, reply: dict[str, Any]) -> None:
        mid, kind = reply.get("id"), reply.get("type")
        row = self.in_flight.pop(mid, None) if isinstance(mid, str) else None
        if row is None and kind == "error" and mid is None and self.in_flight:
            row = self.in_flight.pop(next(iter(self.in_flight)))  # in order: the oldest
        if row is None:
            return
        self.in_flight_bytes -= len(row.body)
        self.done_ids.append(row.msg_id)
        if kind == "ack":
            self.session_acks += 1
            self.counts["acked"] += 1
            self.counts["duplicates"] += bool(reply.get("duplicate"))
        else:
            self.counts["rejected"] += 1
            code, field = reply.get("code"), reply.get("field")
            self.warn_once(("error", code, field), "telescope: the server rejected a %s "
                           "message (%s, field %s): %s; dropped (logged once per code and "
                           "field)", row.kind, code, field, reply.get("message"))
        if not self.commit_scheduled:
            self.commit_scheduled = True
            assert self.loop is not None
            self.loop.call_soon(self.commit_done)

    def commit_done(self) -> None:
        """Forget acknowledged / rejected messages (one outbox transaction per loop pass)."""
        self.commit_scheduled = False
        ids, self.done_ids = self.done_ids, []
        try:
            assert self.spool is not None
            self.spool.delete(ids)
        except sqlite3.Error as exc:
            self.counts["spool_errors"] += 1
            self.warn_once("delete", "telescope: outbox delete failed: %s", exc)
        self.check_waiters()
        self.send_event.set()

    def on_closed(self, code: int | None, exc: Exception) -> None:
        if code == CLOSE_BAD_TOKEN:
            self.set_fatal("the server refused the ingest token (close 4401)")
        elif code == CLOSE_TOO_LARGE:
            row = next(iter(self.in_flight.values()), None)
            if row is not None:
                self.max_message_bytes = min(self.max_message_bytes, len(row.body) - 1)
                self.batcher.max_bytes = max(1024, min(self.batcher.max_bytes,
                                                       self.max_message_bytes // 2))
                self.split(row, "refused by the server as too large (close 4413)")
        elif code == CLOSE_RATE_LIMITED:
            self.rate = max(1.0, self.rate / 2)
            self.warn_once("4429", "telescope: the server rate-limited this client (close "
                           "4429); sending at most %.0f messages/s", self.rate)
        else:
            self.note_failure(f"connection closed ({code}): {exc}")

    def split(self, row: Row, why: str) -> None:
        assert self.spool is not None
        parts = spool_mod.split(spool_mod.decode(row.body, row.fmt))
        if parts is None:
            self.spool.delete([row.msg_id])
            self.counts["dropped_too_large"] += 1
            log.warning("telescope: a %s message (%d bytes) was %s and cannot be split; "
                        "dropped", row.kind, len(row.body), why)
        else:
            self.spool.replace(row.msg_id, [
                Outgoing(p["id"], row.kind, len(p.get("reward", ())), row.fmt,
                         spool_mod.encode(p, row.fmt)) for p in parts])
            self.counts["splits"] += 1
            self.warn_once(("split", why), "telescope: a %s message was %s; split in halves",
                           row.kind, why)
        for w in self.flush_waiters:  # the halves went to the end: wait for them too
            w.target = max(w.target, self.spool.last_seq)
        self.check_waiters()

    def set_fatal(self, reason: str) -> None:
        self.fatal = reason
        log.error("telescope: %s; nothing more will be sent to %s. Messages stay in the "
                  "outbox %s and are replayed by a later client with a valid token.",
                  reason, self.c.url, self.spool.path if self.spool else None)
        self.resolve_all(False)

    def note_failure(self, what: str) -> None:
        self.warn_once(("conn", what.split(":")[0]), "telescope: cannot reach %s (%s); "
                       "retrying with backoff, messages wait in the outbox", self.c.url, what)


def _step_number(step: Any) -> int:
    if isinstance(step, (bool, float, str)):
        raise TypeError(f"step {step!r} is not an integer")
    value = operator.index(step)
    if value < 0 or value >= 2**63:
        raise ValueError(f"step {value} is out of range")
    return value


__all__ = ["Client", "SenderOptions", "connect", "ingest_url", "STAT_NAMES"]
