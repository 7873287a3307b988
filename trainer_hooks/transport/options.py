"""`SenderOptions`: every keyword option of `connect()`, read by the client and its sender
thread's parts."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


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
    max_queue: int = 4096  # log calls waiting for the sender thread; more wait for room
    copy_columns: bool = False  # True: log_samples copies its columns (safe with reused
    # buffers; costs one copy per column on the caller's thread)
    max_spool_bytes: int = 1 << 30
    max_messages_per_second: float = 1000.0  # frames per second (a batch frame counts once)
    backoff_initial: float = 0.25
    backoff_max: float = 10.0
    open_timeout: float = 10.0
    ack_timeout: float = 60.0  # no reply this long to the oldest frame sent: reconnect, resend
    poll_interval: float = 0.05
    dedupe_steps: int = 10_000  # 0: no restart de-duplication of samples
    fsync: bool = False  # True: survive power loss too, at an fsync per outbox write (and
    # every message's body on disk before it is sent: no staging)
    spill_after: float = 3.0  # a message's body is written to the outbox file once it waited
    # this long unacknowledged (at once while the server is away, on sync() and at close);
    # 0: every body on disk before it is sent
    max_staged_bytes: int = 128 << 20  # bodies held in memory at most; more are spilled
    atexit_timeout: float = 2.0
    compression: str | None = None
    proxy: str | bool | None = True  # True: the system's proxy settings; None or False: no
    # proxy; or a proxy URL
    text_per_group: int = 0  # > 0: only this many samples of each group keep their text
    text_pick: str = "best_worst"  # which of them: "best", "worst", "best_worst", "random"
    # "thread": the sender runs on a thread of the trainer's process; "process": in a helper
    # process fed through shared memory (transport.helper); default $TELESCOPE_SENDER or thread
    sender: str = field(default_factory=lambda: os.environ.get("TELESCOPE_SENDER", "thread"))
    ring_bytes: int = 32 << 20  # sender="process": the shared memory log calls are written
    # into; a call waits for room when the sender process is this far behind
