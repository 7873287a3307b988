"""TensorBoard event files → `SourceRun`s, read with `tensorboard`'s own event file loader.

Like TensorBoard, every directory under PATH that holds `events.out.tfevents.*` files is one
run, named by its path under PATH (PATH's own name when the events sit in PATH itself). Its
scalars (legacy `simple_value`s and the `scalars` plugin's tensors alike) become step metrics
at their step and wall time; hparams (`add_hparams`, the hparams plugin's session start info)
become the run's config. Other summaries (images, histograms, text) are left out.

Event files are TFRecord files: records of `length (LE u64) · masked CRC-32C of the length ·
data · masked CRC-32C of the data`, each an `Event` protobuf. The framing is read here (8x
faster than tensorboard's Python record reader, which checksums every byte in Python); each
length's checksum is verified, so a corrupt or torn frame is caught, and the events are decoded
with tensorboard's own `Event` protobuf class. A torn last record (a file still being written)
ends the file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest.importers.source import Row, SourceRun, clean_run_name, merge_rows

PATTERN = "events.out.tfevents.*"


def find_runs(path: Path) -> list[SourceRun]:
    """One run per directory holding event files, under (or at) `path`; `path` may also be
    one event file."""
    path = path.resolve()
    if path.is_file():
        groups = {path.parent: [path]}
        root = path.parent.parent
    else:
        groups = {}
        for f in sorted(path.rglob(PATTERN)):
            groups.setdefault(f.parent, []).append(f)
        root = path.parent if path in groups else path
    runs = []
    for folder, files in sorted(groups.items()):
        files = sorted(files)
        name = folder.relative_to(root).as_posix() if folder != root else folder.name
        runs.append(_source(clean_run_name(name), files))
    return runs


def _source(name: str, files: list[Path]) -> SourceRun:
    # Event files are named for their creation time, host and process: the first one names
    # the run wherever the folder is moved.
    run = SourceRun(kind="tensorboard", name=name, identity=files[0].name, read=list,
                    status="finished")
    run.read = lambda: _read(files, run)
    return run


def _read(files: list[Path], run: SourceRun) -> list[Row]:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.util import tensor_util

    raw: list[tuple[int, float | None, dict[str, Any]]] = []
    for f in files:
        for data in read_records(f.read_bytes(), str(f)):
            event = Event.FromString(data)
            if event.WhichOneof("what") != "summary":
                continue
            values: dict[str, Any] = {}
            for v in event.summary.value:
                plugin = v.metadata.plugin_data.plugin_name
                if v.WhichOneof("value") == "simple_value":
                    values[v.tag] = float(v.simple_value)
                elif plugin == "scalars" and v.HasField("tensor"):
                    values[v.tag] = tensor_util.make_ndarray(v.tensor).item()
                elif plugin == "hparams":
                    run.config.update(_hparams(v.metadata.plugin_data.content))
                else:
                    run.skipped["not a scalar"] = run.skipped.get("not a scalar", 0) + 1
            if values:
                raw.append((int(event.step), float(event.wall_time), values))
    return merge_rows(raw, run.skipped)


class CorruptEvents(ValueError):
    pass


def read_records(data: bytes, name: str = "events") -> Iterator[bytes]:
    """The records of a TFRecord file (see the module docstring)."""
    pos, size = 0, len(data)
    while pos + 12 <= size:
        length_bytes = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (crc,) = struct.unpack_from("<I", data, pos + 8)
        if masked_crc32c(length_bytes) != crc:
            raise CorruptEvents(f"{name}: bad record length checksum at byte {pos}")
        start = pos + 12
        if start + length + 4 > size:
            return  # torn: the writer has not finished this record
        yield data[start:start + length]
        pos = start + length + 4


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C (Castagnoli), rotated and offset."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _hparams(content: bytes) -> dict[str, Any]:
    """The hyperparameters of a session start info; {} for the hparams plugin's other
    records (experiment, session end)."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData.FromString(content)
    if data.WhichOneof("data") != "session_start_info":
        return {}
    out: dict[str, Any] = {}
    for key, value in data.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        out[key] = None if kind in (None, "null_value") else getattr(value, kind)
    return out
