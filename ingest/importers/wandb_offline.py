"""W&B offline runs (`wandb/offline-run-*`) → `SourceRun`s, with no network.

An offline run folder holds `run-<id>.wandb`: W&B's transaction log, the records the run would
have sent (run, config, history, summary, exit, ...), each a `wandb_internal_pb2.Record`
protobuf, framed LevelDB-log style: a 7-byte file header (`:W&B`, magic 0xBEE1, version 0),
then 32 KiB blocks of chunks, each `crc32 (LE u32) · length (LE u16) · type (u8) · data`, a
record being one FULL chunk or FIRST, MIDDLE..., LAST (a block's last < 7 bytes are padding).
The framing is read here, every chunk's checksum verified as wandb's own reader does (CRC-32
of the data, seeded with the CRC-32 of the chunk's type byte); the records are decoded with
the `wandb` package's own protobuf classes. History rows become step metrics (`_timestamp`
is their time; nested keys joined with "."), the run's config (and later config updates) the
run config, the final summary the config's `summary`, the exit record the run's status (exit
code 0: finished, else failed; none: left running). A row's step is W&B's `_step`, except for
a key with a step metric (`define_metric(key or glob, step_metric=...)`, as HF Trainer
defines `train/global_step` for every key): it is at that metric's value in its row, or the
last one logged (W&B's `step_sync`), and the step metrics are the axis, not metrics. A run
with no definitions that logged `train/global_step` is imported on it. Strings are kept
(categorical keys); media and histograms (nested `{_type, ...}` fields) are left out and
counted, never as their fields (`img.height`).

PATH is an offline-run folder, its `.wandb` file, or a folder holding offline-run folders
(`wandb/` or the folder above it). The folders of one run id (W&B offline cannot resume: a
"resumed" offline run is a new folder with the same id, its steps counted from 0 again) are
segments of ONE run, read in the order they started: at a step that several logged, the
latest segment's values stand (as a run resumed from a checkpoint re-does its steps), and the
import says so.

Damage: a chunk whose checksum does not match, of an unknown type, longer than its block, out
of sequence (a MIDDLE without a FIRST...), non-zero block padding, a wrong file header or a
record that does not decode is corruption (`DamagedSource`, naming the file and the chunk's
byte offset): nothing of the run is imported. A file that ends inside a chunk or between the
chunks of a split record is a torn tail (a run still being written or killed, or a copy cut
short): the whole records before it are imported, with a warning, and the run is not marked
ended. (A length field is not checksummed: a damaged length in the very last chunk reads as a
torn tail.)
"""

from __future__ import annotations

import fnmatch
import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.importers.source import (
    DamagedSource,
    Row,
    SourceRun,
    clean_run_name,
    count,
    media_reason,
    merge_rows,
    on_user_axis,
    plain_config,
    restep,
)

HEADER = struct.Struct("<4sHB")
HEADER_BYTES = HEADER.pack(b":W&B", 0xBEE1, 0)
CHUNK = struct.Struct("<IHB")
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_CRC_SEED = {t: zlib.crc32(bytes([t])) & 0xFFFFFFFF for t in (FULL, FIRST, MIDDLE, LAST)}


@dataclass
class Segment:
    """One `.wandb` file of a run, as far as its first records tell (name, start time)."""

    path: Path
    run_id: str
    identity: str
    name: str
    started: float
    error: DamagedSource | None = None  # raised when the run is read


def find_runs(path: Path) -> list[SourceRun]:
    path = path.resolve()
    if path.is_file():
        files = [path]
    elif path.name.startswith(("offline-run-", "run-")):
        files = sorted(path.glob("*.wandb"))
    else:
        files = sorted(path.glob("offline-run-*/*.wandb")) or sorted(
            path.glob("wandb/offline-run-*/*.wandb"))
    groups: dict[str, list[Segment]] = {}
    for f in files:
        segment = _segment(f)
        groups.setdefault(segment.run_id, []).append(segment)
    return [_source(sorted(g, key=lambda s: (s.started, str(s.path)))) for g in groups.values()]


def _segment(path: Path) -> Segment:
    run_id = path.stem.removeprefix("run-")
    segment = Segment(path, run_id, run_id, run_id, 0.0)
    try:
        for _, record in _records(path):  # the run record comes first: stop there
            if record.WhichOneof("record_type") == "run":
                segment.name = record.run.display_name or record.run.run_id or run_id
                segment.identity = f"{record.run.project}/{record.run.run_id or run_id}"
                segment.started = record.run.start_time.ToSeconds()
                break
    except DamagedSource as exc:
        segment.error = exc  # reported with its run, the other runs are imported
    return segment


def _source(segments: list[Segment]) -> SourceRun:
    first = segments[0]
    run = SourceRun(kind="wandb", name=clean_run_name(first.name), identity=first.identity,
                    read=list)
    run.read = lambda: _read(segments, run)
    return run


def _read(segments: list[Segment], run: SourceRun) -> list[Row]:
    raw: list[tuple[int, float | None, dict[str, Any]]] = []
    seen: set[int] = set()
    torn = False
    summary: dict[str, Any] = {}
    for segment in segments:
        if segment.error is not None:
            raise segment.error
        log = Log(segment.path.read_bytes(), str(segment.path))
        read = _read_segment(log, run)
        summary.update(read.summary)
        rows = read.on_steps(run.skipped)
        again = seen.intersection(r[0] for r in rows)
        if again:
            run.warnings.append(
                f"{segment.path.parent.name} logs {len(again):,} steps ({min(again)}–"
                f"{max(again)}) again that an earlier segment of run {run.name!r} logged: "
                "this later segment's values stand at those steps")
        seen.update(r[0] for r in rows)
        raw += rows
        if log.torn_at is not None:
            torn = True
            run.warnings.append(
                f"{segment.path}: ends inside the record at byte {log.torn_at} (a run still "
                f"being written or killed, or a copy cut short): imported the {log.count:,} "
                "whole records before it; the run is not marked ended")
    if torn:
        run.status = None
    run.config = plain_config(run.config)
    if summary:
        run.config["summary"] = summary
    return merge_rows(raw, run.skipped)


@dataclass
class SegmentRead:
    """What one log holds besides its config and status: history rows (at W&B's `_step`),
    the metric definitions (`define_metric`) and the summary."""

    rows: list[tuple[int, float | None, dict[str, Any]]]
    step_metrics: dict[str, str]  # key: its step metric (named or expanded from a glob)
    globs: list[tuple[str, str]]  # (glob, step metric), in the order they were defined
    summary: dict[str, Any]

    def step_metric(self, key: str) -> str | None:
        if key in self.step_metrics:
            return self.step_metrics[key]
        return next((m for glob, m in self.globs if fnmatch.fnmatchcase(key, glob)), None)

    def on_steps(self, skipped: dict[str, int]) -> list[tuple[int, float | None,
                                                             dict[str, Any]]]:
        """The rows on each key's step metric (`define_metric(..., step_metric=...)`); with no
        definitions, on HF Trainer's `train/global_step` when the run logged one."""
        if not self.step_metrics and not self.globs:
            return on_user_axis(self.rows, skipped)
        keys = set().union(*(values for _, _, values in self.rows))
        axes = {m for k in keys if (m := self.step_metric(k)) is not None and m != k}
        return list(restep(self.rows, self.step_metric, axes, skipped))


def _read_segment(log: Log, run: SourceRun) -> SegmentRead:
    """The history rows, metric definitions and summary of one log; its config and exit
    status go to `run` (a later segment's exit record decides)."""
    from wandb.proto import wandb_internal_pb2

    read = SegmentRead([], {}, [], {})
    run.status = None
    for _, record in _decode(log, wandb_internal_pb2):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            read.rows.append(_history_row(record.history, len(read.rows), run.skipped))
        elif kind == "metric":
            _metric(record.metric, read)
        elif kind == "summary":
            _summary(record.summary, read.summary)
        elif kind == "run":
            run.config.update(_config_items(record.run.config.update))
        elif kind == "config":
            run.config.update(_config_items(record.config.update))
        elif kind == "exit":
            run.status = "finished" if record.exit.exit_code == 0 else "failed"
    return read


def _metric(metric: Any, read: SegmentRead) -> None:
    if not metric.step_metric:
        return
    if metric.name:
        read.step_metrics[metric.name] = metric.step_metric
    elif metric.glob_name:
        read.globs.append((metric.glob_name, metric.step_metric))


def _media(items: Any) -> dict[tuple[str, ...], str]:
    """The nested keys that are a media value or histogram (`img` of `img._type`), by type."""
    out: dict[tuple[str, ...], str] = {}
    for item in items:
        if len(item.nested_key) > 1 and item.nested_key[-1] == "_type":
            try:
                kind = json.loads(item.value_json)
            except ValueError:
                continue
            out[tuple(item.nested_key[:-1])] = str(kind)
    return out


def _in_media(path: tuple[str, ...], media: dict[tuple[str, ...], str]) -> bool:
    return any(path[:n] in media for n in range(1, len(path)))


def _history_row(history: Any, index: int,
                 skipped: dict[str, int]) -> tuple[int, float | None, dict[str, Any]]:
    """One history row's values by key (nested keys joined with "."); a media value or
    histogram (nested `{_type, ...}` fields) is left out, counted once."""
    media = _media(history.item)
    for kind in media.values():
        count(skipped, media_reason(kind))
    values: dict[str, Any] = {}
    for item in history.item:
        path = tuple(item.nested_key) or (item.key,)
        if media and _in_media(path, media):
            continue
        try:
            values[".".join(path)] = json.loads(item.value_json)
        except ValueError:
            continue
    step = values.pop("_step", None)
    when = values.pop("_timestamp", None)
    values.pop("_runtime", None)
    if not isinstance(step, int):
        step = history.step.num if history.HasField("step") else index
    return step, when if isinstance(when, (int, float)) else None, values


def _summary(summary: Any, into: dict[str, Any]) -> None:
    """A summary record applied to `into`: its updates and removals, without W&B's own keys
    (`_wandb`, `_step`, ...) and media."""
    media = _media(summary.update)
    for item in summary.update:
        path = tuple(item.nested_key) or (item.key,)
        if path[0].startswith("_") or _in_media(path, media):
            continue
        try:
            into[".".join(path)] = json.loads(item.value_json)
        except ValueError:
            continue
    for item in summary.remove:
        into.pop(".".join(tuple(item.nested_key) or (item.key,)), None)


def _config_items(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key = ".".join(item.nested_key) if item.nested_key else item.key
        try:
            out[key] = json.loads(item.value_json)
        except ValueError:
            out[key] = item.value_json
    return out


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    from wandb.proto import wandb_internal_pb2

    return _decode(Log(path.read_bytes(), str(path)), wandb_internal_pb2)


def _decode(log: Log, pb2: Any) -> Iterator[tuple[int, Any]]:
    """(byte offset, `Record`) of each whole record of `log`."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    for offset, data in log:
        record = pb2.Record()
        try:
            record.ParseFromString(data)
        except DecodeError as exc:
            raise DamagedSource(f"{log.name}: record at byte {offset} is not a W&B record "
                                f"({exc})") from None
        yield offset, record


class Log:
    """The records of a W&B transaction log (see the module docstring): iterate for (byte
    offset, data) of each whole record; then `torn_at` is the byte where an unfinished last
    record begins (None: the log ends on a record boundary) and `count` the records read."""

    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.name = data, name
        self.torn_at: int | None = None
        self.count = 0

    def _damaged(self, at: int, what: str) -> DamagedSource:
        return DamagedSource(f"{self.name}: chunk at byte {at}: {what} (the file is damaged)")

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        data, size = self.data, len(self.data)
        if size < HEADER.size and HEADER_BYTES.startswith(data):
            self.torn_at = 0  # the writer had only begun
            return
        if data[:HEADER.size] != HEADER_BYTES:
            raise DamagedSource(f"{self.name}: not a W&B transaction log (header "
                                f"{data[:HEADER.size]!r})")
        pos, pending, first_at = HEADER.size, None, 0
        while pos < size:
            left = BLOCK - pos % BLOCK
            if left < CHUNK.size or data[pos:pos + CHUNK.size] == bytes(CHUNK.size):
                # a block's trailer, or zeroed space: zeros to the end of the block
                if pending is not None or data[pos:pos + left].strip(b"\0"):
                    raise self._damaged(pos, "non-zero bytes in a block's padding")
                pos += left
                continue
            chunk = self._chunk(pos, left)
            if chunk is None:
                break
            kind, body = chunk
            if (kind in (FULL, FIRST)) != (pending is None):
                raise self._damaged(pos, "out of sequence (a split record's chunks are "
                                    "FIRST, MIDDLE..., LAST)")
            if kind == FIRST:
                pending, first_at = bytearray(body), pos
            elif kind != FULL:
                assert pending is not None
                pending += body
            if kind in (FULL, LAST):
                self.count += 1
                yield (pos, body) if kind == FULL else (first_at, bytes(pending or b""))
                pending = None
            pos += CHUNK.size + len(body)
        if pos < size or pending is not None:
            self.torn_at = first_at if pending is not None else pos

    def _chunk(self, pos: int, left: int) -> tuple[int, bytes] | None:
        """(type, data) of the chunk at `pos`, its checksum verified; None when the file ends
        inside it (`left`: bytes to the end of its block)."""
        if pos + CHUNK.size > len(self.data):
            return None
        crc, length, kind = CHUNK.unpack_from(self.data, pos)
        if kind not in _CRC_SEED:
            raise self._damaged(pos, f"unknown chunk type {kind}")
        if CHUNK.size + length > left:
            raise self._damaged(pos, f"a {length}-byte chunk does not fit in its block")
        body = self.data[pos + CHUNK.size:pos + CHUNK.size + length]
        if len(body) < length:
            return None
        if zlib.crc32(body, _CRC_SEED[kind]) & 0xFFFFFFFF != crc:
            raise self._damaged(pos, "its checksum does not match")
        return kind, body
