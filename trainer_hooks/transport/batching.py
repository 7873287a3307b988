"""Columnar batching of samples: validated `SampleChunk`s → the fields of `samples` messages.

`SampleBatcher` accumulates chunks up to a sample count and an estimated encoded size (cutting
a chunk that does not fit; each sample's text counts at its own size, so samples with long
texts are not averaged with short ones) and seals them into one `Batch`; `build_fields`
concatenates the chunks column by column with numpy (a column a chunk lacks becomes nulls).
A label column of few distinct values (`env`, `stop_reason`, `discard_reason`) is also made
dictionary-encoded (`Batch.coded`, what the message carries: the server then reads no string
per sample), from each chunk's distinct values; with `labels_as_lists` (a server older than
that form) no longer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainer_hooks.transport.samples import MAX_CODED_VALUES, SampleChunk
from trainer_hooks.wire.columns import FEW_SHARE
from trainer_hooks.wire.protocol import (
    DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE,
    LABEL_COLUMNS,
    MAX_STEPS_PER_MESSAGE,
    TEXT_COLUMNS,
)


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
        self.code_labels = True  # label columns of few values dictionary-encoded

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

    def cap_bytes(self, max_bytes: int) -> None:
        """Make batches of at most `max_bytes` (never under 1 KiB) from now on: the server
        refused a message as too large."""
        self.max_bytes = max(1024, min(self.max_bytes, max_bytes))

    def labels_as_lists(self) -> None:
        """Seal label columns as lists from now on: the server refused the encoded form."""
        self.code_labels = False

    def due(self, now: float, interval: float) -> bool:
        return self.oldest is not None and now - self.oldest >= interval

    def seal(self) -> Batch:
        chunks, self.chunks, self.n, self.nbytes, self.oldest = self.chunks, [], 0, 0, None
        self.steps, self.text_bytes = set(), 0
        return build_fields(chunks, code_labels=self.code_labels)


@dataclass
class Batch:
    """The fields of one `samples` message and its sample count; `coded`: label columns of
    `fields` dictionary-encoded, which the message carries instead (`fields` keeps their lists
    for the outbox's record of the samples, `resume`)."""

    fields: dict[str, Any]
    n: int
    coded: dict[str, dict[str, Any]] = field(default_factory=dict)


def build_fields(chunks: list[SampleChunk], *, code_labels: bool = True) -> Batch:
    """Concatenate chunks into the fields of one `samples` message (absent columns of a
    chunk become nulls); with `code_labels`, `Batch.coded` too (`_coded`)."""
    fields: dict[str, Any] = {
        "step": _steps(chunks),
        "sample_id": _ids([c.sample_id for c in chunks]),
        "group_id": _ids([c.group_id for c in chunks]),
        "reward": np.concatenate([c.reward for c in chunks]),
    }
    env = _scalar_or_list(chunks, [c.env for c in chunks])
    if env is not None:
        fields["env"] = env
    for name in _union(c.floats for c in chunks):
        fields[name] = _floats(chunks, [c.floats.get(name) for c in chunks])
    for name in _union(c.strings for c in chunks):
        strings: list[str | None] = []
        for c in chunks:
            strings.extend(c.strings.get(name) or [None] * c.n)
        fields[name] = strings
    for name in TEXT_COLUMNS:
        if any(name in c.texts for c in chunks):
            fields[name] = [s for c in chunks for s in c.texts.get(name, [None] * c.n)]
    fields["time"] = _floats(chunks, [c.time for c in chunks])
    metric_names = _union(c.metrics for c in chunks)
    if metric_names:
        fields["metrics"] = {k: _floats(chunks, [c.metrics.get(k) for c in chunks])
                             for k in metric_names}
    n = sum(c.n for c in chunks)
    coded = {}
    if code_labels:
        for name in LABEL_COLUMNS:
            if isinstance(fields.get(name), list):
                column = _coded(chunks, name, n)
                if column is not None:
                    coded[name] = column
    return Batch(fields, n, coded)


def _coded(chunks: list[SampleChunk], name: str, n: int) -> dict[str, Any] | None:
    """A label column dictionary-encoded (docs/protocol.md, `samples`): `values`, the distinct
    labels of its chunks, and `codes`, one byte per sample (a typed array on the wire), -1
    for none — from each chunk's own codes (`SampleChunk.codes`: nothing per sample here but
    one numpy take) or its one value for all. None when its values are not few (more than
    one per FEW_SHARE samples, or more than MAX_CODED_VALUES): the list then."""
    vocabulary: dict[str | None, None] = {}
    for c in chunks:
        value = c.label(name)
        if not isinstance(value, list):
            vocabulary[value] = None
        elif name in c.codes:
            vocabulary.update(dict.fromkeys(c.codes[name][0]))
        else:
            return None  # (a call of more values than one byte codes)
    vocabulary.pop(None, None)
    values = list(vocabulary)
    if len(values) * FEW_SHARE > n or len(values) > MAX_CODED_VALUES:
        return None
    position: dict[str | None, int] = dict(zip(values, range(len(values)), strict=True))
    position[None] = -1
    parts = [c.label_codes(name, position) for c in chunks]
    return {"values": values, "codes": np.concatenate(parts)}


def _ids(columns: list[list[Any] | np.ndarray]) -> list[Any] | np.ndarray:
    """One id column over the chunks: an int64 array when every chunk's is one, else a list."""
    if all(isinstance(c, np.ndarray) for c in columns):
        return np.concatenate(columns)
    return [i for c in columns for i in (c.tolist() if isinstance(c, np.ndarray) else c)]


def _steps(chunks: list[SampleChunk]) -> int | np.ndarray:
    """The step: one number when every chunk has the same one, else an int64 array of one
    per sample (sent as a typed array, as the protocol allows for `step`)."""
    first = chunks[0].step
    if all(type(c.step) is int and c.step == first for c in chunks):
        return first
    return np.concatenate([c.step if isinstance(c.step, np.ndarray) else
                           np.full(c.n, c.step, dtype=np.int64) for c in chunks])


def _floats(chunks: list[SampleChunk], values: list[Any]) -> np.ndarray:
    """One number column over the chunks: each chunk's value (an array, or one number for
    all its samples), NaN where a chunk has none."""
    parts = []
    for c, v in zip(chunks, values, strict=True):
        if type(v) is np.ndarray and v.shape == (c.n,):
            parts.append(v)  # (the common case: numpy's broadcast_to costs ~4 µs a call)
        else:
            parts.append(np.full(c.n, np.nan if v is None else v, dtype=np.float64))
    return np.concatenate(parts)


def _scalar_or_list(chunks: list[SampleChunk], values: list[Any]) -> Any:
    """One value when every chunk has the same scalar, else one value per sample."""
    if all(not isinstance(v, (list, np.ndarray)) for v in values) and \
            all(v == values[0] for v in values):
        return values[0]
    out: list[Any] = []
    for c, v in zip(chunks, values, strict=True):
        out.extend(v.tolist() if isinstance(v, np.ndarray) else
                   v if isinstance(v, list) else [v] * c.n)
    return out


def _union(dicts: Iterable[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for d in dicts:
        names.update(dict.fromkeys(d))
    return list(names)
