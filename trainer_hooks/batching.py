"""Columnar batching of samples: validated `SampleChunk`s → the fields of `samples` messages.

`SampleBatcher` accumulates chunks up to a sample count and an estimated encoded size (cutting
a chunk that does not fit; each sample's text counts at its own size, so samples with long
texts are not averaged with short ones) and seals them into one `Batch`; `build_fields`
concatenates the chunks column by column with numpy (a column a chunk lacks becomes nulls).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from trainer_hooks.sample_columns import SampleChunk
from trainer_hooks.schema import (
    DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE,
    MAX_STEPS_PER_MESSAGE,
    TEXT_COLUMNS,
)


def identity_record(fields: Mapping[str, Any]) -> tuple[int, int, bytes]:
    """What the outbox keeps of a samples message for restart de-duplication."""
    step = fields["step"]
    lo, hi = (step, step) if isinstance(step, int) else (min(step), max(step))
    data = msgpack.packb([step, fields.get("env"), fields["group_id"], fields["sample_id"]],
                         use_bin_type=True)
    return lo, hi, data


def _steps_of(chunk: SampleChunk) -> set[int]:
    if isinstance(chunk.step, int):
        return {chunk.step}
    return set(np.unique(chunk.step).tolist())


def _within_step_cap(chunk: SampleChunk) -> list[SampleChunk]:
    """A chunk cut so that no part spans more than MAX_STEPS_PER_MESSAGE distinct steps."""
    if isinstance(chunk.step, int):
        return [chunk]
    firsts = np.sort(np.unique(chunk.step, return_index=True)[1])
    if firsts.size <= MAX_STEPS_PER_MESSAGE:
        return [chunk]
    cuts = [0, *firsts[MAX_STEPS_PER_MESSAGE::MAX_STEPS_PER_MESSAGE].tolist(), chunk.n]
    return [chunk.part(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


class SampleBatcher:
    """Accumulates chunks into columnar `samples` message bodies of at most `max_samples`
    samples, about `max_bytes` encoded bytes, at most `max_text_bytes` of text (the server's
    default limit per message) and MAX_STEPS_PER_MESSAGE distinct steps (a bigger chunk is
    cut)."""

    def __init__(self, max_samples: int, max_bytes: int,
                 max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE) -> None:
        self.max_samples, self.max_bytes = max_samples, max_bytes
        self.max_text_bytes = max_text_bytes
        self.chunks: list[SampleChunk] = []
        self.steps: set[int] = set()
        self.n = self.nbytes = self.text_bytes = 0
        self.oldest: float | None = None

    def add(self, chunk: SampleChunk, now: float) -> list[Batch]:
        """Add a chunk (cut to fill the open batch); returns the batches it completed."""
        sealed = []
        for piece in _within_step_cap(chunk):
            sealed += self._add(piece, now)
        return sealed

    def _add(self, chunk: SampleChunk, now: float) -> list[Batch]:
        sealed = []
        if self.chunks and len(self.steps | _steps_of(chunk)) > MAX_STEPS_PER_MESSAGE:
            sealed.append(self.seal())
        a = 0
        while a < chunk.n:
            room = min(self.max_samples - self.n,
                       chunk.fit(a, self.max_bytes - self.nbytes,
                                 self.max_text_bytes - self.text_bytes))
            if room <= 0 and self.chunks:
                sealed.append(self.seal())
                continue
            b = min(chunk.n, a + max(room, 1))  # a lone sample above max_bytes goes alone
            part = chunk if a == 0 and b == chunk.n else chunk.part(a, b)
            self.chunks.append(part)
            self.steps |= _steps_of(part)
            self.n += part.n
            self.nbytes += part.nbytes
            if part.text_bytes is not None:
                self.text_bytes += int(part.text_bytes.sum())
            self.oldest = now if self.oldest is None else self.oldest
            a = b
        if self.n >= self.max_samples:
            sealed.append(self.seal())
        return sealed

    def due(self, now: float, interval: float) -> bool:
        return self.oldest is not None and now - self.oldest >= interval

    def seal(self) -> Batch:
        chunks, self.chunks, self.n, self.nbytes, self.oldest = self.chunks, [], 0, 0, None
        self.steps, self.text_bytes = set(), 0
        return build_fields(chunks)


@dataclass
class Batch:
    """The fields of one `samples` message and its sample count."""

    fields: dict[str, Any]
    n: int


def build_fields(chunks: list[SampleChunk]) -> Batch:
    """Concatenate chunks into the fields of one `samples` message (absent columns of a
    chunk become nulls)."""
    n = sum(c.n for c in chunks)

    def floats(get: Callable[[SampleChunk], Any]) -> np.ndarray:
        return np.concatenate([np.full(c.n, np.nan) if get(c) is None
                               else np.broadcast_to(get(c), c.n) for c in chunks])

    def scalar_or_list(get: Callable[[SampleChunk], Any]) -> Any:
        values = [get(c) for c in chunks]
        if all(not isinstance(v, (list, np.ndarray)) for v in values) and \
                all(v == values[0] for v in values):
            return values[0]
        out: list[Any] = []
        for c, v in zip(chunks, values, strict=True):
            out.extend(v.tolist() if isinstance(v, np.ndarray) else
                       v if isinstance(v, list) else [v] * c.n)
        return out

    fields: dict[str, Any] = {
        "step": scalar_or_list(lambda c: c.step),
        "sample_id": [i for c in chunks for i in c.sample_id],
        "group_id": [i for c in chunks for i in c.group_id],
        "reward": np.concatenate([c.reward for c in chunks]),
    }
    env = scalar_or_list(lambda c: c.env)
    if env is not None:
        fields["env"] = env
    for name in _union(c.floats for c in chunks):
        fields[name] = floats(lambda c, k=name: c.floats.get(k))  # type: ignore[misc]
    for name in _union(c.strings for c in chunks):
        fields[name] = [s for c in chunks for s in c.strings.get(name, [None] * c.n)]
    for name in TEXT_COLUMNS:
        if any(name in c.texts for c in chunks):
            fields[name] = [s for c in chunks for s in c.texts.get(name, [None] * c.n)]
    fields["time"] = floats(lambda c: c.time)
    metric_names = _union(c.metrics for c in chunks)
    if metric_names:
        fields["metrics"] = {k: floats(lambda c, k=k: c.metrics.get(k))  # type: ignore[misc]
                             for k in metric_names}
    return Batch(fields, n)


def _union(dicts: Iterable[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for d in dicts:
        names.update(dict.fromkeys(d))
    return list(names)
