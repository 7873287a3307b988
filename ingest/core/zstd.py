"""The server's zstd contexts: one compressor (level 1) and one decompressor per thread, since
a context must not be shared by threads and the ingest, pipeline and read threads all pack or
unpack (sample texts: ingest.core.texts; event blobs: ingest.core.eventstore)."""

from __future__ import annotations

import threading

import zstandard

LEVEL = 1
_local = threading.local()


def contexts() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    """This thread's (compressor, decompressor)."""
    pair: tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor] | None = getattr(
        _local, "zstd", None)
    if pair is None:
        pair = _local.zstd = (zstandard.ZstdCompressor(level=LEVEL), zstandard.ZstdDecompressor())
    return pair
