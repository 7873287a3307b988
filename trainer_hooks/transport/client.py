"""`connect()`: the durable, non-blocking sender (docs/protocol.md; README "Send metrics").

    client = connect("ws://127.0.0.1:8000", token, run="grpo-1", config=cfg,
                     environments="envs.yaml")
    client.log_step(step, reduced)                      # a dict of numbers
    client.log_samples(step, sample_id=ids, group_id=gids, reward=rewards, env="countdown",
                       metrics={"correct": correct}, completion_tokens=lengths,
                       prompt=prompts, completion=completions)   # text: optional
    client.log_rewards(step, results, sample_id=ids, group_id=gids, env="countdown")
    client.close(timeout=10.0, status="finished")       # True: everything acknowledged

**Who sends.** Only one process per run needs a client for step metrics: with data parallelism,
reduce on every rank (`reduce_window(window, dst=0)`) and call `log_step` on rank 0 only (the
other ranks get None). That client *starts* the run: it sends `run.start` (with `config` and
`environments` when given). Reward workers (separate processes or machines) each open their own
client to the same run name with `join=True` and send only samples: they join the newest run
of that name and never start one. Only the run's owner passes `status=` to `close` (or calls
`end`).

**New experiment or resume.** Every client makes a run *incarnation* (an id for this attempt)
and puts it on each message. A starting client whose run name already holds an earlier
experiment on the server (steps or samples, from a `run.start`) gets a **new run**, shown as
`<name>-2` (`-3`, ...; `client.run_name`, `client.run_id` once the server answered, and a
warning in the log): a second run of a script never merges into the first, nor is anything of
it dropped. `resume=True` continues the newest run of that name instead (a trainer restarted
from its checkpoint), reusing the incarnation its outbox remembers.

**Threading.** `log_*` only append a small record (`queue.Call`) to a deque (`log_step` copies
its dict; sample columns are taken by reference and read on the sender thread within
`poll_interval`, so pass fresh ones or connect with `copy_columns=True`): no validation,
encoding, I/O or lock on the caller's thread, and no exception escapes (a problem is logged once
and counted in `client.stats`; `client.not_stored` lists every value not stored and why) — but
while the sender thread is more than COMPACT_BEHIND calls behind (a burst), `log_samples` packs
its lists of numbers into the float64 arrays the sender would make of them (one C call a column,
~3 µs for 512 values), so a backlog holds 8 bytes a value, not a Python float's 32, and the
caller's lists are freed at once (holding a burst's lists made making them 3× dearer). When
the sender thread falls `max_queue` calls behind, a `log_*` call waits for room (bounded
back-pressure: at most one pump pass of the sender thread, a few ms;
`stats["waited_queue_full"]`) instead of dropping anything. A daemon thread runs its own asyncio
loop: every `poll_interval` it drains the deque, validates and converts the values (numpy),
batches samples columnar (`max_batch_samples` / `max_batch_bytes`, sealed at least every
`flush_interval`), gives every message a unique id (`<12 hex of a uuid4>-<counter>`) and enters
it in the on-disk outbox (`transport.outbox`, SQLite) *before* sending: its row and sample
identities at once, its body once it has waited `spill_after` seconds (3) unacknowledged, at
once while the server is away, on `sync()` and at `close()` (a body acknowledged sooner never
touches the disk; `spill_after=0` or `fsync=True`: every body on disk before it is sent). The
sender task pipelines messages in outbox order, small ones packed into batch frames (at most
`max_in_flight` frames unacknowledged, client-side rate limit), the receiver task matches acks
and error replies by id and deletes those messages from the outbox. On a lost connection
everything unacknowledged is resent in order, with its original id, after a capped exponential
backoff with jitter; the server acks a repeat as a duplicate and applies nothing twice.

**Restarts.** A new process with the same spool directory, server, token and run name replays
the previous process's unacknowledged messages first (original ids and incarnation, so they
reach the run they were logged for). With `resume=True` it also remembers which samples the
previous process had sealed for that run (the last `dedupe_steps` steps): samples re-logged
after resuming from a checkpoint are left out instead of being counted twice, with a warning
(`stats["deduped_samples"]`). Without resume nothing is ever left out.
`client.sync()` returns once everything logged so far is in the outbox on disk (or
acknowledged); call it before writing a checkpoint and a crash loses nothing logged before the
checkpoint. A process killed outright loses the messages of its last `spill_after` seconds
whose body was not on disk yet; the next client of the slot says how many: those never sent
(`stats["lost_unspooled"]`; a resume logs their samples again) and those sent but not
acknowledged (`stats["unconfirmed_unspooled"]`; the server may have stored them, so a resume
leaves their samples out rather than risk counting them twice).

**Server answers.** An error reply drops that message (logged once per code and field, never
retried). Close 4401 (bad token) stops sending for good, keeping the outbox for a later run with
a valid token; 4413 splits the refused message in halves (or drops an unsplittable one) and
lowers the batch size; 4429 halves the client's message rate and backs off.

**Text.** `prompt` and `completion` (strings, one per sample) are stored apart from the
numbers and shown in the sample viewer. They count at their own size in a batch, and a sample
whose text alone exceeds what one message may carry loses it (named in `not_stored`).
`text_per_group=k` keeps the text of only k samples of each group of a `log_samples` call (the
rest still send their numbers), chosen by `text_pick`: `"best_worst"` (default: ⌈k/2⌉ highest
and ⌊k/2⌋ lowest rewards), `"best"`, `"worst"` or `"random"` — selected on the sender thread.

**Where the time goes.** `client.span(name, ...)` times a block (a context manager: one
tuple appended per span, a few µs on the caller's thread), `log_events(...)` logs spans or
instants already timed, `log_gauges(...)` time-series points; `connect(...,
system_metrics=True)` samples CPU, memory and GPUs every 10 s (a number: that many seconds;
`timeline.system`), `watch_prometheus(client, url)` scrapes a Prometheus endpoint
(`timeline.prometheus`). They are buffered columnar (`timeline.recorder`) and sealed as
`events` / `gauges` messages into the same outbox at 4,096 rows or after 1 s, and on `flush()`,
`sync()` and `close()`: durable, resent and acknowledged like everything else. Rows the server
would refuse are left out, counted in `invalid_values` and named in `not_stored`.

**Layout.** This module is the caller's side (`connect`, `Client`). It hands the sender
thread (`engine.SenderEngine`) four things and nothing else: the run target (`run`), the options
(`options`), the call queue (`queue.CallQueue`) and the bookkeeping (`bookkeeping`). The engine
runs `sealer.Sealer` (queue → outbox, with `samples`, `batching` and `resume`) and
`connection.Connection` (outbox → server) over the outbox (`outbox`).
"""

from __future__ import annotations

import atexit
import collections
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from trainer_hooks.rewards.ranges import environment_declarations
from trainer_hooks.rewards.recorder import RewardRecorder
from trainer_hooks.timeline.recorder import TimelineRecorder
from trainer_hooks.transport import exits
from trainer_hooks.transport.bookkeeping import STAT_NAMES, Bookkeeping
from trainer_hooks.transport.engine import SenderEngine
from trainer_hooks.transport.helper import ProcessSender, RemoteBooks
from trainer_hooks.transport.options import SenderOptions
from trainer_hooks.transport.outbox import scope_of
from trainer_hooks.transport.queue import (
    Call,
    CallQueue,
    ControlCall,
    FlushCall,
    RewardsCall,
    SamplesCall,
    StepCall,
    StopCall,
    SyncCall,
    Waiter,
)
from trainer_hooks.transport.run import RunTarget, ingest_url
from trainer_hooks.transport.samples import TEXT_PICKS, PerGroup, packed_numbers
from trainer_hooks.transport.sync import undelivered
from trainer_hooks.transport.timeline import (
    SYSTEM_METRICS_INTERVAL,
    Stoppable,
    TimelineBooks,
    TimelineCalls,
)
from trainer_hooks.wire.protocol import TEXT_COLUMNS, check_key

log = logging.getLogger("trainer_hooks.sender")
_now = time.time
# Builds a log call's record from one tuple in C (transport.queue: no Python frame on the
# caller's thread); the fields in the record's order.
_new = tuple.__new__


def connect(url: str, token: str, run: str, config: dict[str, Any] | None = None,
            environments: Any = None, *, resume: bool = False, join: bool = False,
            system_metrics: bool | float = False, **options: Any) -> Client:
    """Start a sender for `run`; see the module docstring. `resume=True` continues the newest
    run of that name (a restarted trainer); `join=True` sends into it without starting it (a
    reward worker, another rank). `system_metrics=True` (or a number of seconds) samples CPU,
    memory and GPUs into gauges (the `[system]` extra; open it on one process per machine).
    Raises only for setup mistakes (a malformed `url` or run name, an unknown option, `join`
    with `resume`, `config` or `environments`, system metrics without psutil), never for the
    network."""
    sampler = None
    if system_metrics:
        from trainer_hooks.timeline.system import SystemSampler

        SystemSampler.check()  # before anything starts: a missing extra is a setup mistake
        sampler = SystemSampler
    client = Client(url, token, run, config=config, environments=environments,
                    options=SenderOptions(**options), resume=resume, join=join)
    if sampler is not None:
        interval = SYSTEM_METRICS_INTERVAL if system_metrics is True else float(system_metrics)
        client.attach(sampler(client.log_gauges, interval=interval))
    return client


def _keep(x: Any) -> Any:
    return x


COMPACT_BEHIND = 64  # calls the sender thread is behind before log_samples packs its lists


def _compact(values: Any) -> Any:
    """A list of Python numbers as the float64 array the sender thread would make of it
    (`samples.packed_numbers`, its own first step: the same values); anything else as it is."""
    packed = packed_numbers(values)
    return values if packed is None else packed


def _compacted_samples(call: SamplesCall) -> SamplesCall:
    """`call` with its number columns' lists packed (`_compact`)."""
    metrics = call.metrics
    return call._replace(
        reward=_compact(call.reward), advantage=_compact(call.advantage),
        prompt_tokens=_compact(call.prompt_tokens),
        completion_tokens=_compact(call.completion_tokens),
        off_policy_steps=_compact(call.off_policy_steps), time=_compact(call.time),
        metrics=None if metrics is None else {k: _compact(v) for k, v in metrics.items()})


def _copy(x: Any) -> Any:
    """A copy of a list, array or tensor column (`copy_columns=True`)."""
    if type(x) is list or type(x) is np.ndarray:
        return x.copy()
    if hasattr(x, "detach") and hasattr(x, "clone"):
        return x.detach().clone()
    return x


def _copied_samples(call: SamplesCall) -> SamplesCall:
    """`call` with every column copied (`copy_columns=True`)."""
    copied = SamplesCall._make(map(_copy, call))
    if call.metrics is None:
        return copied
    return copied._replace(metrics={k: _copy(v) for k, v in call.metrics.items()})


class Client(TimelineCalls):
    """A connection to one run. `log_*` and `span` are safe to call from any thread (spans,
    events and gauges: `transport.timeline.TimelineCalls`)."""

    def __init__(self, url: str, token: str, run: str, *, config: dict[str, Any] | None,
                 environments: Any, options: SenderOptions, resume: bool = False,
                 join: bool = False) -> None:
        check_key(run, "run", kind="run name")
        if options.encoding not in ("msgpack", "json"):
            raise ValueError("encoding must be 'msgpack' or 'json'")
        if type(options.text_per_group) is not int or options.text_per_group < 0:
            raise ValueError("text_per_group must be an integer ≥ 0 (0: every sample's text)")
        if options.text_pick not in TEXT_PICKS:
            raise ValueError(f"text_pick must be one of {TEXT_PICKS}")
        if options.sender not in ("thread", "process"):
            raise ValueError("sender must be 'thread' or 'process'")
        if join and (resume or config is not None or environments is not None):
            raise ValueError("join=True only sends into a run someone else starts: it takes "
                             "no resume, config or environments")
        self.url = ingest_url(url)
        self.run = run
        self.resume, self.join = bool(resume), bool(join)
        self.scope = scope_of(self.url, token)
        self.options = options
        self._target = RunTarget(self.url, token, run, self.scope, self.resume, self.join)
        self._copy_columns = options.copy_columns  # spans, events and gauges (buffered here)
        self._copy_samples = options.copy_columns  # log_samples, log_rewards
        self._per_group = options.text_per_group
        self._closed = False
        self._close_result: bool | None = None
        self._recorders: list[RewardRecorder] = []
        self._engine: SenderEngine | ProcessSender
        self._thread: threading.Thread | ProcessSender
        self._calls: CallQueue | ProcessSender
        self._queue: collections.deque[Call] | ProcessSender
        if options.sender == "process":
            # the sender in a helper process: a log call writes its record into shared memory
            # (transport.helper; sample columns are copied there, so copy_columns only
            # concerns the timeline's, which this process buffers)
            self._books = RemoteBooks(log)
            self._engine = self._thread = self._calls = self._queue = ProcessSender(
                self._target, options, self._books, options.ring_bytes)
            self._copy_samples = False
            self._compact_behind = float("inf")  # (the handoff packs every list at once)
        else:
            self._books = Bookkeeping(log)
            self._compact_behind = COMPACT_BEHIND
            self._calls = calls = CallQueue(options.max_queue)
            self._queue = calls.entries  # appended to directly: the cheapest log call
            self._engine = engine = SenderEngine(self._target, options, calls, self._books)
            self._thread = threading.Thread(target=engine.run, daemon=True,
                                            name=f"telescope-sender[{run}]")
            self._thread.start()
        self.ledger = self._books.ledger
        if isinstance(self._engine, SenderEngine):  # (the sender process starts meanwhile)
            self._engine.started.wait(30)
        self._timeline = TimelineRecorder(self._put_control, TimelineBooks(self._books),
                                          lists_for_nulls=options.encoding == "json",
                                          label=run)
        self._spans = self._timeline.spans
        self._attached: list[Stoppable] = []
        if not join:
            self._run_start(config, environments)
            exits.register(self)  # the run ends with the process (transport.exits)
        else:
            atexit.register(self._atexit)

    # ---------------------------------------------------------------- logging (caller thread)

    def log_step(self, step: int, metrics: Any = None, *, time: float | None = None) -> None:
        """Queue one step's metrics ({key: number or None}). Never blocks, never raises."""
        try:
            self._put(_new(StepCall, (step, dict(metrics), _now() if time is None else time)))
        except Exception as exc:  # noqa: BLE001
            self._caller_problem("log_step", exc)

    def log_samples(self, step: Any, *, sample_id: Any = None, group_id: Any = None,
                    reward: Any = None, env: Any = None, metrics: Any = None,
                    advantage: Any = None, prompt_tokens: Any = None,
                    completion_tokens: Any = None, stop_reason: Any = None,
                    off_policy_steps: Any = None, discard_reason: Any = None,
                    time: Any = None, prompt: Any = None, completion: Any = None) -> None:
        """Queue N samples, columnar (lists, numpy arrays or tensors of length N; `step`,
        `env`, `group_id`, string and optional columns may be one scalar for all; `prompt`
        and `completion` are lists of N strings or Nones). Never blocks, never raises: a bad
        call is logged once and counted (`invalid_calls`).

        The columns are read on the sender thread shortly after the call (within
        `poll_interval`), not copied: pass fresh lists / arrays / tensors, or do not modify
        them in place afterwards (or connect with `copy_columns=True`)."""
        try:
            call = _new(SamplesCall, (step, sample_id, group_id, reward, env,
                                      None if metrics is None else dict(metrics), advantage,
                                      prompt_tokens, completion_tokens, off_policy_steps,
                                      stop_reason, discard_reason, prompt, completion,
                                      _now() if time is None else time))
            # The default path only appends: a cold call costs what a bare append does.
            if self._copy_samples:
                call = _copied_samples(call)
            elif len(self._queue) > self._compact_behind:  # a burst: hold no Python floats
                call = _compacted_samples(call)
            if self._per_group and (prompt is not None or completion is not None):
                call = call._replace(prompt=self._text(call.prompt),
                                     completion=self._text(call.completion))
            self._put(call)
        except Exception as exc:  # noqa: BLE001
            self._caller_problem("log_samples", exc)

    def log_rewards(self, step: Any, results: Any, *, sample_id: Any = None,
                    group_id: Any = None, env: Any = None, **columns: Any) -> None:
        """Queue `RewardResult`s (reward + sample metrics) with their samples' identity and
        any optional columns; converted to columns on the sender thread."""
        try:
            snap = _copy if self._copy_samples else _keep
            cols = {k: snap(v) for k, v in columns.items()}
            if self._per_group:
                cols.update({k: self._text(cols[k]) for k in TEXT_COLUMNS if k in cols})
            self._put(_new(RewardsCall, (step, list(results), snap(sample_id), snap(group_id),
                                         env, cols, _now())))
        except Exception as exc:  # noqa: BLE001
            self._caller_problem("log_rewards", exc)

    def _text(self, values: Any) -> Any:
        """A text column marked to keep only `text_per_group` samples' text of each group."""
        if values is None:
            return None
        return PerGroup(values, self._per_group, self.options.text_pick)

    def declare_ranges(self, environments: Any) -> None:
        """Replace the run's environment declarations (a YAML path, dicts or env classes)."""
        decls, problems = environment_declarations(environments)
        self._books.count("invalid_calls", len(problems))
        self._put(ControlCall({"type": "ranges", "environments": decls}))

    def reward_recorder(self, env: str | None = None, **kwargs: Any) -> RewardRecorder:
        """A `RewardRecorder` feeding this client; `flush()` and `close()` flush it first."""
        rec = RewardRecorder(self, env, **kwargs)
        self._recorders.append(rec)
        return rec

    def end(self, status: str = "finished") -> None:
        """Queue `run.end` (only the run's owner should)."""
        self._put(ControlCall({"type": "run.end", "status": status, "time": _now()}))

    # ---------------------------------------------------------------- waiting

    def flush(self, timeout: float | None = 10.0, *, aggregated: bool = False) -> bool:
        """Send everything logged so far; True when all of it is stored on the server (each
        message acknowledged after its commit) and no value was lost (left out, dropped,
        rejected: see `not_stored`) since the previous flush. With `aggregated=True` also
        wait until the server has aggregated it, so the read API returns it (a `barrier`).
        Waits at most `timeout`."""
        if self._close_result is not None:
            return self._close_result
        for rec in list(self._recorders):
            rec.flush()
        self._timeline.drain()
        if aggregated:
            self._queue.append(ControlCall({"type": "barrier"}))  # never refused, like a flush
        return self._wait(FlushCall, timeout)

    def sync(self, timeout: float | None = 10.0) -> bool:
        """True once everything logged so far is in the outbox (on disk, unless `spool=False`)
        or acknowledged: what a checkpoint needs."""
        if self._close_result is not None:
            return self._close_result
        self._timeline.drain()
        return self._wait(SyncCall, timeout)

    def _wait(self, kind: type[FlushCall | SyncCall], timeout: float | None) -> bool:
        if not self._thread.is_alive():
            return False
        if isinstance(self._engine, ProcessSender):
            self._engine.ready()  # (its start, overlapping the caller's, is no wait for the server)
        waiter = Waiter()
        self._queue.append(kind(waiter))  # never refused: not bounded by max_queue
        self._engine.kick()
        return waiter.wait(timeout)

    def close(self, timeout: float | None = 10.0, *, status: str | None = None) -> bool:
        """Flush with `aggregated=True` (at most `timeout`), then stop the sender thread;
        returns what `flush` returned: True when every value logged since the last flush is
        stored and aggregated. `status="finished"|"failed"` also ends the run; without it the
        run stays open (shown `crashed` once nothing keeps it alive, unless another client
        ends it). A client that started its run and is not closed when the process ends ends
        it itself: `failed` on an uncaught exception or SIGTERM, else `finished`
        (transport.exits). When the run ends `finished` (or this client joined it) and the
        server acknowledged everything, the outbox file is removed, and its run's directory
        with the last slot; otherwise it stays, for `telescope sync` or a resume (which
        remembers the samples it sealed). Idempotent."""
        if self._close_result is not None:
            return self._close_result
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in self._attached:
            worker.stop()
        self._timeline.close()
        if status is not None:
            self.end(status)
        ok = self.flush(timeout, aggregated=True)
        if self.ledger.total or self._books["deduped_samples"]:
            log.warning("telescope: run %r closed; %d values were not stored (see "
                        "client.not_stored), %d re-logged samples left out as already stored "
                        "(resume)", self.run, self.ledger.total,
                        self._books["deduped_samples"])
        self._closed = True
        # Nothing left to replay and no resume to remember samples for: the outbox goes
        self._engine.discard_when_empty = status == "finished" or self.join
        self._queue.append(StopCall())
        self._engine.kick()
        left = None if deadline is None else max(0.0, deadline - time.monotonic()) + 5.0
        self._thread.join(left)
        self._report_undelivered(timeout)
        atexit.unregister(self._atexit)
        exits.unregister(self)
        self._close_result = ok
        return ok

    def _report_undelivered(self, waited: float | None) -> None:
        """One line for what the stopped sender left in the outbox: what, why, where, and
        the `telescope sync` command that delivers it."""
        left = self._engine.left
        if left is None or not left.total or self._thread.is_alive():
            return
        log.warning("%s", undelivered(self.run, self.url, left, self.spool_path,
                                      answered=self._books["connects"] > 0, waited=waited))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: Any) -> None:
        """Close; a run this client started ends `failed` when the block raised, else
        `finished`."""
        self.close(status=None if self.join else "finished" if kind is None else "failed")

    def _atexit(self) -> None:
        self.close(self.options.atexit_timeout)

    def end_with_process(self, status: str) -> None:
        """The process ends (transport.exits): end the run with `status`, waiting at most
        `atexit_timeout`."""
        if self._close_result is None:
            self.close(self.options.atexit_timeout, status=status)

    # ---------------------------------------------------------------- state

    @property
    def run_id(self) -> int | None:
        """The run's id on the server, once it acknowledged our run.start."""
        return self._target.run_id

    @property
    def run_name(self) -> str | None:
        """The run's name on the server (`<run>-2` for a new experiment under a used name)."""
        return self._target.run_name

    @property
    def stats(self) -> dict[str, int]:
        """Counters (see STAT_NAMES) plus `logged_events` and `logged_gauges` (rows sealed
        into `events` / `gauges` messages), `pending` (outbox messages not yet acknowledged),
        `in_flight`, `spool_bytes` (their bodies, on disk or staged in memory), `connected`
        (0/1) and `not_stored`."""
        status = self._engine.status()  # (first: the sender process's answer updates both)
        return {**self._books.counts(), **status,
                "logged_events": self._timeline.logged_events,
                "logged_gauges": self._timeline.logged_gauges,
                "not_stored": self.ledger.total}

    @property
    def not_stored(self) -> list[dict[str, Any]]:
        """The latest 1000 records of values this client did not store: {"reason", "what",
        "count", "why"}; `stats["not_stored"]` counts them all."""
        return self.ledger.snapshot()

    @property
    def spool_path(self) -> Path | None:
        return self._engine.outbox_path

    @property
    def helper_pid(self) -> int | None:
        """The sender process's id (`sender="process"`), else None."""
        return self._engine.pid if isinstance(self._engine, ProcessSender) else None

    # ---------------------------------------------------------------- internals

    def _put(self, entry: Call) -> None:
        queue = self._queue
        if len(queue) < self._calls.max_size and not self._closed:
            queue.append(entry)  # the only work on the caller's thread
        elif self._closed:
            self._books.count("dropped_closed")
            self.ledger.add("closed", _what(entry), 1, "logged after close()")
            self._books.warn_once("closed", "telescope: a log call after close() is not "
                                  "stored (counted in stats)")
        elif self._wait_for_room():
            queue.append(entry)
        else:
            self._books.count("dropped_queue_full")
            self.ledger.add("sender stopped", _what(entry), 1, "the sender thread has stopped")

    def _wait_for_room(self) -> bool:
        """Back-pressure: block until the sender thread has drained the queue below
        `max_queue` (one pump pass). False only when the sender thread is gone."""
        calls = self._calls
        self._books.count("waited_queue_full")
        self._books.warn_once("queue", "telescope: logging faster than the sender thread seals "
                              "(max_queue=%d calls behind); log calls wait for it (counted in "
                              "stats['waited_queue_full'])", calls.max_size)
        while not calls.has_room():
            if not self._thread.is_alive():
                return False
            calls.room.clear()
            if calls.has_room():
                break
            self._engine.kick()
            calls.room.wait(0.05)
        return True

    def _snapshot(self, call: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(map(_copy, call)) if self._copy_columns else call

    def _put_control(self, message: dict[str, Any]) -> None:
        """A message sent as it is (the timeline's events and gauges)."""
        self._put(ControlCall(message))

    def _caller_problem(self, where: str, exc: Exception) -> None:
        self._books.count("invalid_calls")
        self.ledger.add("invalid call", where, 1, f"{type(exc).__name__}: {exc}")
        self._books.warn_once(where, "telescope: %s ignored a bad call (counted in stats, "
                              "logged once): %s: %s", where, type(exc).__name__, exc)

    def _run_start(self, config: Any, environments: Any) -> None:
        msg: dict[str, Any] = {"type": "run.start", "resume": self.resume}
        if config is not None:
            try:
                msg["config"] = orjson.loads(orjson.dumps(
                    config, default=str,
                    option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
            except (TypeError, orjson.JSONEncodeError) as exc:
                self._caller_problem("config", exc)
        if environments is not None:
            decls, problems = environment_declarations(environments)
            self._books.count("invalid_calls", len(problems))
            msg["environments"] = decls
        self._put(ControlCall(msg))


def _what(call: Call) -> str:
    """A queued call, named for the ledger of values not stored."""
    if isinstance(call, StepCall):
        return f"log_step({call.step!r:.40}): {len(call.metrics)} metrics"
    if isinstance(call, SamplesCall):
        return f"log_samples(step {call.step!r:.40})"
    if isinstance(call, RewardsCall):
        return f"log_rewards(step {call.step!r:.40})"
    if isinstance(call, ControlCall):
        return f"a {call.message.get('type')} message"
    return "a log call"


__all__ = ["STAT_NAMES", "Client", "SenderOptions", "connect", "ingest_url"]
