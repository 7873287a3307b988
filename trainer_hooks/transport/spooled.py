"""What an outbox file holds, read without changing it: its pending messages by type
(`Summary`) and where they go (`TARGET_KEYS` in its `meta` table: the run name, the server's
ingest URL and the token the trainer used; `outbox.Outbox.remember_target` writes them).

Read by the outbox itself (`Outbox.summary`, for the line `close()` logs about what it leaves
behind) and by `telescope sync` (`transport.sync`), which inspects a slot before it delivers
it and lists it with `--dry-run`. Each function takes an open SQLite connection and only reads.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

TARGET_KEYS = ("run", "url", "token")


@dataclass(frozen=True)
class Summary:
    """Pending messages: how many of each type, the samples they carry, and how many rows a
    killed process never wrote the body of (`unwritten`: they cannot be sent; the next open of
    the slot drops them)."""

    messages: dict[str, int] = field(default_factory=dict)
    samples: int = 0
    unwritten: int = 0

    @property
    def total(self) -> int:
        return sum(self.messages.values())

    def __add__(self, other: Summary) -> Summary:
        kinds = {k: self.messages.get(k, 0) + other.messages.get(k, 0)
                 for k in {*self.messages, *other.messages}}
        return Summary(kinds, self.samples + other.samples, self.unwritten + other.unwritten)

    def __sub__(self, other: Summary) -> Summary:
        kinds = {k: n - other.messages.get(k, 0) for k, n in self.messages.items()}
        return Summary({k: n for k, n in kinds.items() if n > 0},
                       max(0, self.samples - other.samples),
                       max(0, self.unwritten - other.unwritten))

    def describe(self) -> str:
        """`"103 messages (50 steps, 1,600 samples, run.start, run.end, 2 barrier)"`."""
        steps = self.messages.get("step", 0)
        parts = [_count(steps, "step"), _count(self.samples, "sample")]
        parts += [kind if n == 1 else f"{n:,} {kind}" for kind, n in sorted(
            self.messages.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER)))
            if kind not in ("step", "samples")]
        inside = ", ".join(p for p in parts if p)
        head = _count(self.total, "message") or "no messages"
        return head + (f" ({inside})" if inside else "")


def _count(n: int, noun: str) -> str:
    return "" if not n else f"{n:,} {noun}" + ("" if n == 1 else "s")


_ORDER = {kind: i for i, kind in enumerate(("run.start", "ranges", "events", "gauges",
                                            "heartbeat", "run.end", "barrier"))}


def summarize(db: sqlite3.Connection) -> Summary:
    """The pending messages of the outbox `db` whose body is written (plus the count of those
    whose body is not)."""
    kinds: dict[str, int] = {}
    samples = unwritten = 0
    for kind, written, n, empty in db.execute(
            "SELECT kind, sum(length(body) > 0), sum(CASE WHEN length(body) > 0 THEN n"
            " ELSE 0 END), sum(length(body) = 0) FROM outbox GROUP BY kind"):
        if written:
            kinds[kind] = written
        samples += n
        unwritten += empty
    return Summary(kinds, samples, unwritten)


def stored_target(db: sqlite3.Connection) -> dict[str, str]:
    """Where the outbox `db`'s messages go, as far as it recorded it (`TARGET_KEYS`; an outbox
    written before trainer_hooks kept them has none)."""
    marks = ",".join("?" * len(TARGET_KEYS))
    return dict(db.execute(f"SELECT name, value FROM meta WHERE name IN ({marks})",
                           TARGET_KEYS).fetchall())
