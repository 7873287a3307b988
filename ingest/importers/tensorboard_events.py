"""TensorBoard event files → `SourceRun`s, read with `tensorboard`'s own event file loader.

Like TensorBoard, every directory under PATH that holds `events.out.tfevents.*` files is one
run, named by its path under PATH (PATH's own name when the events sit in PATH itself). Its
scalars (legacy `simple_value`s and the `scalars` plugin's tensors alike) become step metrics
at their step and wall time, a text (`add_text`, HF Trainer's string logs) a categorical value
when it is short enough; hparams (`add_hparams`, the hparams plugin's session start info)
become the run's config, also from the folder of its own `add_hparams` makes inside the run's
(with the metrics given with them). Other summaries (images, histograms, audio, text tables)
are left out and counted by kind.

Event files are TFRecord files: records of `length (LE u64) · masked CRC-32C of the length ·
data · masked CRC-32C of the data`, each an `Event` protobuf. The framing is read here and both
checksums of every record are verified, all records at once (`checksums`: tensorboard's own
reader checks them a byte at a time in Python, 8x slower than this whole import); the events are
decoded with tensorboard's own `Event` protobuf class.

Damage: a checksum that does not match, anywhere, or a record that does not decode as an
`Event` is corruption (`DamagedSource`, naming the file and the record's byte offset): nothing
of the run is imported. A file that ends inside its last record — fewer than 12 header bytes
left, or a header whose length checksum holds but whose data runs past the end — is a torn
tail (a run still being written, or a copy cut short): the whole records before it are
imported, with a warning, and the run is not marked finished. A run is otherwise `finished`
(event files have no end record).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ingest.importers.checksums import crc32c, le_u32, masked
from ingest.importers.source import (
    DamagedSource,
    Row,
    SourceRun,
    clean_run_name,
    count,
    merge_rows,
)

PATTERN = "events.out.tfevents.*"
PEEK_BYTES, PEEK_RECORDS = 1 << 16, 8  # where add_hparams's records are, in its own folder


def find_runs(path: Path) -> list[SourceRun]:
    """One run per directory holding event files, under (or at) `path`; `path` may also be
    one event file. The folder `add_hparams` makes inside a run's folder (its hparams and
    their metrics) is part of that run, when it is the run's only such folder."""
    path = path.resolve()
    if path.is_file():
        groups = {path.parent: [path]}
        root = path.parent.parent
    else:
        groups = {}
        for f in sorted(path.rglob(PATTERN)):
            groups.setdefault(f.parent, []).append(f)
        root = path.parent if path in groups else path
    hparams = _hparams_folders(groups)
    runs = []
    for folder, files in sorted(groups.items()):
        if folder in hparams.values():
            continue
        name = folder.relative_to(root).as_posix() if folder != root else folder.name
        extra = groups[hparams[folder]] if folder in hparams else []
        runs.append(_source(clean_run_name(name), sorted(files), sorted(extra)))
    return runs


def _hparams_folders(groups: dict[Path, list[Path]]) -> dict[Path, Path]:
    """{run folder: the one folder inside it that `add_hparams` wrote} (torch's and
    tensorboardX's SummaryWriter write the hparams, and their metrics, into
    `<logdir>/<run_name or time.time()>`). A run folder with several is a sweep's parent: each
    trial stays a run."""
    found: dict[Path, list[Path]] = {}
    for folder, files in groups.items():
        parent = next((p for p in folder.parents if p in groups), None)
        if parent is not None and _begins_with_hparams(sorted(files)[0]):
            found.setdefault(parent, []).append(folder)
    return {parent: kids[0] for parent, kids in found.items() if len(kids) == 1}


def _begins_with_hparams(path: Path) -> bool:
    """Whether an event file's first records hold hparams (`add_hparams` writes the
    experiment, session start and end first). Checksums are verified when the run is read."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    from tensorboard.compat.proto.event_pb2 import Event

    with path.open("rb") as f:
        data = f.read(PEEK_BYTES)
    heads, lengths, _ = _walk(data)
    for head, length in list(zip(heads, lengths, strict=True))[:PEEK_RECORDS]:
        body = data[head + Records.HEAD:head + Records.HEAD + length]
        if len(body) < length:
            break
        try:
            event = Event.FromString(body)
        except DecodeError:
            return False
        if event.WhichOneof("what") == "summary" and any(
                v.metadata.plugin_data.plugin_name == "hparams" for v in event.summary.value):
            return True
    return False


def _source(name: str, files: list[Path], hparams: list[Path]) -> SourceRun:
    # Event files are named for their creation time, host and process: the first one names
    # the run wherever the folder is moved.
    run = SourceRun(kind="tensorboard", name=name, identity=files[0].name, read=list,
                    status="finished")
    run.read = lambda: _read([*files, *hparams], run)
    return run


def _read(files: list[Path], run: SourceRun) -> list[Row]:
    raw: list[tuple[int, float | None, dict[str, Any]]] = []
    for f in files:
        records = Records(f.read_bytes(), str(f))
        for offset, event in records.events():
            if event.WhichOneof("what") != "summary":
                continue
            values = _values(event, run, f"{f}: record at byte {offset}")
            if values:
                raw.append((int(event.step), float(event.wall_time), values))
        if records.torn_at is not None:
            run.status = None  # still being written, maybe: it did not end
            run.warnings.append(
                f"{f}: ends inside the record at byte {records.torn_at} (a run still being "
                f"written, or a copy cut short): imported the {records.count:,} whole records "
                "before it; the run is not marked finished")
    return merge_rows(raw, run.skipped)


# A summary value that is no scalar, by how it is counted when left out
LEFT_OUT = {"image": "media (image)", "audio": "media (audio)", "histo": "histogram",
            "images": "media (image)", "histograms": "histogram", "pr_curves": "media (pr curve)",
            "mesh": "media (mesh)", "text": "media (text table)"}


def _values(event: Any, run: SourceRun, where: str) -> dict[str, Any]:
    """The scalars and texts of a summary event; hparams go to the run's config."""
    values: dict[str, Any] = {}
    for v in event.summary.value:
        plugin = v.metadata.plugin_data.plugin_name
        if v.WhichOneof("value") == "simple_value":
            values[v.tag] = float(v.simple_value)
        elif plugin == "scalars" and v.HasField("tensor"):
            scalar = _tensor(v, where)
            if scalar.size != 1:  # checksummed, yet not a scalar
                raise DamagedSource(f"{where}: scalar {v.tag!r} is not one number")
            values[v.tag] = scalar.item()
        elif plugin == "text" and v.HasField("tensor") and (text := _tensor(v, where)).size == 1:
            one = text.reshape(-1)[0]
            tag = v.tag.removesuffix("/text_summary")  # what add_text appends
            values[tag] = one.decode("utf-8", "replace") if isinstance(one, bytes) else str(one)
        elif plugin == "hparams":
            run.config.update(_hparams(v.metadata.plugin_data.content, where))
        else:
            why = LEFT_OUT.get(plugin) or LEFT_OUT.get(v.WhichOneof("value") or "")
            count(run.skipped, why or f"not a scalar ({plugin or v.WhichOneof('value')})")
    return values


def _tensor(v: Any, where: str) -> Any:
    from tensorboard.util import tensor_util

    try:
        return tensor_util.make_ndarray(v.tensor)
    except (ValueError, TypeError) as exc:  # checksummed, yet not a tensor
        raise DamagedSource(f"{where}: {v.tag!r} is not a tensor ({exc})") from None


class Records:
    """The records of one TFRecord file, checksums verified (see the module docstring).

    `offsets`/`lengths`: where each whole record's data is; `torn_at`: the byte where an
    unfinished last record begins (None when the file ends on a record boundary)."""

    HEAD = 12  # length (8) and its checksum (4)

    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.name = data, name
        heads, lengths, self.torn_at = _walk(data)
        buf = np.frombuffer(data, dtype=np.uint8)
        heads_a, lengths_a = np.array(heads, dtype=np.int64), np.array(lengths, dtype=np.int64)
        # Every header walked, the torn one's too: a damaged length is corruption, and is
        # never taken for a torn tail.
        self._check(buf, heads_a, heads_a, np.full(heads_a.size, 8), "length")
        if self.torn_at is not None and heads and heads[-1] == self.torn_at:
            heads_a, lengths_a = heads_a[:-1], lengths_a[:-1]
        self.offsets = heads_a + self.HEAD
        self.lengths = lengths_a
        self._check(buf, heads_a, self.offsets, lengths_a, "data")
        self.count = int(heads_a.size)

    def _check(self, buf: np.ndarray, heads: np.ndarray, starts: np.ndarray,
               lengths: np.ndarray, what: str) -> None:
        if not heads.size:
            return
        bad = masked(crc32c(buf, starts, lengths)) != le_u32(buf, starts + lengths)
        if bad.any():
            at = int(heads[int(np.argmax(bad))])
            raise DamagedSource(f"{self.name}: record at byte {at}: its {what} checksum does "
                                "not match (the file is damaged)")

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        """(byte offset of the record, its data) for each whole record."""
        for start, length in zip(self.offsets.tolist(), self.lengths.tolist(), strict=True):
            yield start - self.HEAD, self.data[start:start + length]

    def events(self) -> Iterator[tuple[int, Any]]:
        from google.protobuf.message import DecodeError
        from tensorboard.compat.proto.event_pb2 import Event

        for offset, data in self:
            try:
                yield offset, Event.FromString(data)
            except DecodeError as exc:
                raise DamagedSource(f"{self.name}: record at byte {offset} is not an Event "
                                    f"({exc})") from None


def _walk(data: bytes) -> tuple[list[int], list[int], int | None]:
    """Each record's header offset and data length, trusting the lengths (checked after);
    and the byte where an unfinished last record begins."""
    heads: list[int] = []
    lengths: list[int] = []
    pos, size = 0, len(data)
    while pos < size:
        if pos + Records.HEAD > size:
            return heads, lengths, pos
        (length,) = struct.unpack_from("<Q", data, pos)
        heads.append(pos)
        lengths.append(length)
        end = pos + Records.HEAD + length + 4
        if end > size:
            return heads, lengths, pos
        pos = end
    return heads, lengths, None


def _hparams(content: bytes, where: str) -> dict[str, Any]:
    """The hyperparameters of a session start info; {} for the hparams plugin's other
    records (experiment, session end)."""
    from google.protobuf.message import DecodeError
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
    except DecodeError as exc:
        raise DamagedSource(f"{where}: hparams that do not decode ({exc})") from None
    if data.WhichOneof("data") != "session_start_info":
        return {}
    out: dict[str, Any] = {}
    for key, value in data.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        out[key] = None if kind in (None, "null_value") else getattr(value, kind)
    return out
