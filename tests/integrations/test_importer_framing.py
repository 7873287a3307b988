"""The importers' framing readers on the edges of damage, without a server: TFRecord files
written by tensorboard's own `RecordWriter`, a `.wandb` log written by wandb offline
(`make_logs.py`). What counts as corrupt and what as a torn tail is docs/integrations.md's
table; a damaged LAST record must never pass for a torn tail."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from ingest.importers.source import DamagedSource
from tests.integrations.test_importers import make_logs, needs


@needs("tensorboard")
def test_crc32c_of_many_spans_is_tensorboards() -> None:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from ingest.importers.checksums import crc32c, masked

    rng = np.random.default_rng(7)
    buf = rng.integers(0, 256, 300_000, dtype=np.uint8)
    lengths = [0, 1, 3, 4, 5, 64, 1023, 1024, 1025, 2048, 5000, 70_001]
    starts = rng.integers(0, 200_000, len(lengths))
    got = masked(crc32c(buf, starts, lengths))
    want = [masked_crc32c(buf[s:s + n].tobytes()) for s, n in zip(starts, lengths, strict=True)]
    assert got.tolist() == want


def tfrecord_file(path: Path, sizes: list[int]) -> list[int]:
    """Records of `sizes` bytes written by tensorboard's RecordWriter; their offsets."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    with open(path, "wb") as f:
        writer = RecordWriter(f)
        for i, n in enumerate(sizes):
            writer.write(bytes([i % 251]) * n)
        writer.flush()
    return [sum(12 + n + 4 for n in sizes[:i]) for i in range(len(sizes))]


@needs("tensorboard")
def test_tfrecords_are_read_whole_and_their_last_checksum_counts(tmp_path: Path) -> None:
    from ingest.importers.tensorboard_events import Records

    sizes = [30, 2000, 45, 70_000, 60]  # some longer than the checksum table's span
    offsets = tfrecord_file(tmp_path / "ok", sizes)
    data = (tmp_path / "ok").read_bytes()
    records = Records(data, "ok")
    assert [(at, len(d)) for at, d in records] == list(zip(offsets, sizes, strict=True))
    assert records.torn_at is None and records.count == len(sizes)
    # A flipped byte in the LAST record's data: corrupt, not a torn tail.
    last = bytearray(data)
    last[-10] ^= 0x01
    with pytest.raises(DamagedSource, match=f"record at byte {offsets[-1]}: its data checksum"):
        Records(bytes(last), "last")
    # A damaged length in the last record that runs it past the end: its checksum tells.
    longer = bytearray(data)
    longer[offsets[-1] + 1] ^= 0x01
    with pytest.raises(DamagedSource, match=f"record at byte {offsets[-1]}: its length"):
        Records(bytes(longer), "longer")


@needs("tensorboard")
@pytest.mark.parametrize("keep", [5, 12, 12 + 30, 12 + 60 + 3])
def test_a_tfrecord_file_cut_inside_its_last_record_is_a_torn_tail(tmp_path: Path,
                                                                  keep: int) -> None:
    from ingest.importers.tensorboard_events import Records

    offsets = tfrecord_file(tmp_path / "f", [30, 2000, 60])
    data = (tmp_path / "f").read_bytes()
    records = Records(data[:offsets[-1] + keep], "f")
    assert records.torn_at == offsets[-1] and records.count == 2
    assert [at for at, _ in records] == offsets[:2]


def wandb_chunk_offsets(data: bytes) -> list[tuple[int, int]]:
    out, pos = [], 7
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        (length,) = struct.unpack_from("<H", data, pos + 4)
        out.append((pos, length))
        pos += 7 + length
    return out


@needs("wandb")
def test_a_wandb_log_whose_last_chunk_is_damaged_is_corrupt(tmp_path: Path) -> None:
    from ingest.importers.wandb_offline import Log

    make_logs("wandb", tmp_path)
    log = sorted((tmp_path / "wandb").glob("offline-run-*/*.wandb"))[0]
    data = log.read_bytes()
    chunks = wandb_chunk_offsets(data)
    assert list(Log(data, "ok")) and chunks[-1][0] + 7 + chunks[-1][1] == len(data)
    damaged = bytearray(data)
    damaged[-1] ^= 0x01  # the last chunk is whole: a bad checksum is damage
    with pytest.raises(DamagedSource, match=f"chunk at byte {chunks[-1][0]}: its checksum"):
        list(Log(bytes(damaged), "damaged"))
    cut = Log(data[:-1], "cut")  # the same chunk, one byte short: a torn tail
    assert len(list(cut)) == cut.count and cut.torn_at == chunks[-1][0]
    with pytest.raises(DamagedSource, match="not a W&B transaction log"):
        list(Log(b"garbage" + data[7:], "garbage"))
