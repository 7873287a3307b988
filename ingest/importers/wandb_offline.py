"""W&B offline runs (`wandb/offline-run-*`) → `SourceRun`s, with no network.

An offline run folder holds `run-<id>.wandb`: W&B's transaction log, the records the run would
have sent (run, config, history, summary, exit, ...), each a `wandb_internal_pb2.Record`
protobuf, framed LevelDB-log style: a 7-byte file header (`:W&B`, magic 0xBEE1, version 0),
then 32 KiB blocks of chunks, each `crc32 (LE u32) · length (LE u16) · type (u8) · data`, a
record being one FULL chunk or FIRST, MIDDLE..., LAST (a block's last < 7 bytes are padding).
The framing is read here; the records are decoded with the `wandb` package's own protobuf
classes. History rows become step metrics (`_step` is the step, `_timestamp` its time; nested
keys joined with "."), the run's config (and later config updates) the run config, the exit
record the run's status (exit code 0: finished, else failed; none: left running).

PATH is an offline-run folder, its `.wandb` file, or a folder holding offline-run folders
(`wandb/` or the folder above it).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.importers.source import Row, SourceRun, clean_run_name, merge_rows, plain_config

HEADER = struct.Struct("<4sHB")
CHUNK = struct.Struct("<IHB")
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_CRC_SEED = {t: zlib.crc32(bytes([t])) & 0xFFFFFFFF for t in (FULL, FIRST, MIDDLE, LAST)}


class CorruptLog(ValueError):
    pass


def find_runs(path: Path) -> list[SourceRun]:
    path = path.resolve()
    if path.is_file():
        files = [path]
    elif path.name.startswith(("offline-run-", "run-")):
        files = sorted(path.glob("*.wandb"))
    else:
        files = sorted(path.glob("offline-run-*/*.wandb")) or sorted(
            path.glob("wandb/offline-run-*/*.wandb"))
    return [_source(f) for f in files]


def _source(path: Path) -> SourceRun:
    run_id = path.stem.removeprefix("run-")
    run = SourceRun(kind="wandb", name=run_id, identity=run_id, read=list)
    for record in _records(path):  # the run record comes first: name the run before reading
        if record.WhichOneof("record_type") == "run":
            run.name = clean_run_name(record.run.display_name or record.run.run_id or run_id)
            run.identity = f"{record.run.project}/{record.run.run_id or run_id}"
            break
    run.read = lambda: _read(path, run)
    return run


def _read(path: Path, run: SourceRun) -> list[Row]:
    raw: list[tuple[int, float | None, dict[str, Any]]] = []
    for record in _records(path):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            raw.append(_history_row(record.history, len(raw)))
        elif kind == "run":
            run.config.update(_config_items(record.run.config.update))
        elif kind == "config":
            run.config.update(_config_items(record.config.update))
        elif kind == "exit":
            run.status = "finished" if record.exit.exit_code == 0 else "failed"
    run.config = plain_config(run.config)
    return merge_rows(raw, run.skipped)


def _history_row(history: Any, index: int) -> tuple[int, float | None, dict[str, Any]]:
    values: dict[str, Any] = {}
    for item in history.item:
        key = ".".join(item.nested_key) if item.nested_key else item.key
        try:
            values[key] = json.loads(item.value_json)
        except ValueError:
            continue
    step = values.pop("_step", None)
    when = values.pop("_timestamp", None)
    values.pop("_runtime", None)
    if not isinstance(step, int):
        step = history.step.num if history.HasField("step") else index
    return step, when if isinstance(when, (int, float)) else None, values


def _config_items(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key = ".".join(item.nested_key) if item.nested_key else item.key
        try:
            out[key] = json.loads(item.value_json)
        except ValueError:
            out[key] = item.value_json
    return out


def _records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2

    for data in read_log(path.read_bytes(), str(path)):
        record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]  # protoc-generated
        record.ParseFromString(data)
        yield record


def read_log(data: bytes, name: str = "log") -> Iterator[bytes]:
    """The records of a W&B transaction log (see the module docstring). A torn last record
    (a run killed mid-write) ends the log; a bad checksum elsewhere raises CorruptLog."""
    if len(data) < HEADER.size:
        raise CorruptLog(f"{name}: too short for a W&B log")
    ident, magic, version = HEADER.unpack_from(data)
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise CorruptLog(f"{name}: not a W&B transaction log (header {data[:7]!r})")
    pos, pending = HEADER.size, None
    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK.size:  # padding at the end of a block
            pos += left
            continue
        if pos + CHUNK.size > len(data):
            return
        crc, length, kind = CHUNK.unpack_from(data, pos)
        chunk = data[pos + CHUNK.size:pos + CHUNK.size + length]
        pos += CHUNK.size + length
        if kind == 0 and length == 0:  # zero fill after the last record
            continue
        if len(chunk) < length or kind not in _CRC_SEED:
            return
        if zlib.crc32(chunk, _CRC_SEED[kind]) & 0xFFFFFFFF != crc:
            if pos >= len(data):
                return
            raise CorruptLog(f"{name}: bad checksum at byte {pos - length - CHUNK.size}")
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = bytearray(chunk)
        elif pending is not None:
            pending += chunk
            if kind == LAST:
                yield bytes(pending)
                pending = None
