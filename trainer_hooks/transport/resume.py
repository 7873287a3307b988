"""Samples stored once across a resume: which samples this outbox's earlier processes sealed.

A trainer restarted from its checkpoint (`connect(..., resume=True)`) logs again the steps
after that checkpoint; the samples its previous process had already sealed for the same run
incarnation are on their way (or stored) and must not count twice. The outbox remembers, per
samples message, which samples it carried (`outbox.Outbox.previous_keys`) for the last
`dedupe_steps` steps; `ResumeFilter` records them and, when resuming, leaves those samples out
of a new chunk (counted and warned about). A new experiment never leaves anything out. Sender
thread only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from trainer_hooks.transport.bookkeeping import Bookkeeping
from trainer_hooks.transport.outbox import Outbox, lines, narrow_ints
from trainer_hooks.transport.samples import SampleChunk

PRUNE_EVERY = 200  # outbox writes between two prunings of the remembered samples


def identity_record(fields: Mapping[str, Any]) -> tuple[int, int, bytes]:
    """What the outbox keeps of a samples message for restart de-duplication: msgpack of
    `[step, env, group ids, sample ids]`, an integer array among them (the step, integer
    ids) narrowed (`outbox.narrow_ints`), a list of strings (envs, string ids) as one
    (`outbox.lines`); `outbox.identity_columns` reads it back, and the lists of records
    written before."""
    step = fields["step"]
    if isinstance(step, int):
        lo = hi = step
    elif isinstance(step, np.ndarray):
        lo, hi = int(step.min()), int(step.max())
    else:
        lo, hi = min(step), max(step)
    data = msgpack.packb([narrow_ints(step), lines(fields.get("env")),
                          lines(narrow_ints(fields["group_id"])),
                          lines(narrow_ints(fields["sample_id"]))],
                         use_bin_type=True, default=_as_list)
    return lo, hi, data


def _as_list(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot pack {type(value).__name__}")


class ResumeFilter:
    """Remembers the sealed samples of `run` in `outbox` and, with `resume`, leaves out those
    an earlier process of the outbox sealed."""

    def __init__(self, outbox: Outbox, books: Bookkeeping, *, run: str, resume: bool,
                 keep_steps: int) -> None:
        self.outbox = outbox
        self.books = books
        self.run = run
        self.resume = resume
        self.keep_steps = keep_steps
        self.max_step = -1
        self.writes = 0
        self._previous: dict[int, set[tuple[str, str, str]]] = {}

    @property
    def records(self) -> bool:
        """Keep which samples were sealed (for a later resume of this run): only with an
        outbox file."""
        return self.keep_steps > 0 and self.outbox.path is not None

    @property
    def filters(self) -> bool:
        """Leave out samples this run's previous process sealed: only when resuming."""
        return self.resume and self.records

    def identity(self, fields: Mapping[str, Any]) -> tuple[int, int, bytes] | None:
        """What the outbox keeps of a samples message (None: nothing)."""
        return identity_record(fields) if self.records else None

    def admit(self, chunk: SampleChunk) -> SampleChunk | None:
        """The chunk without the samples an earlier process sealed (when resuming); None
        when none is left."""
        if self.filters:
            kept = self._drop_replayed(chunk)
            if kept is None:
                return None
            chunk = kept
        top = chunk.step if isinstance(chunk.step, int) else int(chunk.step.max())
        self.max_step = max(self.max_step, top)
        return chunk

    def written(self) -> None:
        """One more outbox write: forget, now and then, samples of steps long past."""
        self.writes += 1
        if self.writes % PRUNE_EVERY == 0 and self.records:
            try:
                self.outbox.prune_keys(self.max_step - self.keep_steps)
            except sqlite3.Error as exc:
                self.books.warn_once("prune", "telescope: outbox pruning failed: %s", exc)

    def _drop_replayed(self, chunk: SampleChunk) -> SampleChunk | None:
        prev = self.outbox.prev_max_step
        low = chunk.step if isinstance(chunk.step, int) else int(chunk.step.min())
        if prev is None or low > prev:
            return chunk
        keep = np.fromiter((step > prev or key not in self._previous_keys(step, prev)
                            for step, key in chunk.identities()), dtype=bool, count=chunk.n)
        dropped = chunk.n - int(keep.sum())
        if dropped:
            self.books.count("deduped_samples", dropped)
            self.books.warn_once("dedupe", "telescope: resuming run %r: left out %d samples "
                                 "of step %d that this run's previous process already logged "
                                 "(they are stored once; stats['deduped_samples'] counts them "
                                 "all)", self.run, dropped, low)
        if dropped == chunk.n:
            return None
        return chunk if not dropped else chunk.take(keep)

    def _previous_keys(self, step: int, prev_max_step: int) -> set[tuple[str, str, str]]:
        """The samples of `step` sealed earlier, loaded 256 steps at a time."""
        if step not in self._previous:
            if len(self._previous) > 4096:
                self._previous.clear()
            hi = min(step + 255, prev_max_step)
            loaded = self.outbox.previous_keys(step, hi)
            for s in range(step, hi + 1):
                self._previous[s] = loaded.get(s, set())
        return self._previous[step]
