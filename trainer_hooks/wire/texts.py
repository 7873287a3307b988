"""Packed text columns in msgpack frames (docs/protocol.md, "Packed text").

A text column (`prompt`, `completion`) of a binary frame may be one msgpack extension value
of type 3 instead of a list of strings, holding the msgpack array `[index, lengths, text]` —

- `index`: int32 little-endian, one per sample: which distinct string it has, -1 for null;
- `lengths`: int32 little-endian, the UTF-8 bytes of each distinct string;
- `text`: the distinct strings' UTF-8, concatenated, as one zstd frame that records its
  content size (which must be the sum of `lengths`), nothing after it.

A GRPO group's samples share their prompt: it is sent (and stored) once. `trainer_hooks`
packs every text column so, on its sender thread, which moves compression from the one
server to the many trainers: the server checks the column (bounded decompression, index and
lengths in range, valid UTF-8 cut at character boundaries) without building a string per
sample, and stores the compressed bytes as they came (`ingest.core.texts`); the text itself is
checked on a helper thread while the server stores the message's other columns
(`TextColumn.text`, `columns.check_text`). The server still takes lists of strings (JSON
frames, other clients, and the sender's fallback for a server older than this format:
`transport.connection`).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import msgpack
import numpy as np
import zstandard

TEXT = 3  # the msgpack extension type
LEVEL = 1  # zstd: fast; English-like text shrinks ~3.6x

_local = threading.local()


def _cctx() -> zstandard.ZstdCompressor:
    ctx = getattr(_local, "cctx", None)
    if ctx is None:
        ctx = _local.cctx = zstandard.ZstdCompressor(level=LEVEL, write_content_size=True)
    return ctx


def _dctx() -> zstandard.ZstdDecompressor:
    ctx = getattr(_local, "dctx", None)
    if ctx is None:
        ctx = _local.dctx = zstandard.ZstdDecompressor()
    return ctx


def distinct(values: list[str | None]) -> tuple[list[str], np.ndarray]:
    """The distinct strings of some values, in order of first appearance, and each value's
    index among them (int32, -1 for None): a group's shared prompt once."""
    seen = dict.fromkeys(values)
    seen.pop(None, None)
    strings: list[str] = list(seen)  # type: ignore[arg-type]  # None popped
    where: dict[str | None, int] = dict(zip(strings, range(len(strings)), strict=True))
    where[None] = -1
    return strings, np.fromiter(map(where.__getitem__, values), np.int32, len(values))


def pack(values: list[str | None]) -> bytes:
    """A text column as the payload of its extension value."""
    strings, index = distinct(values)
    joined = "".join(strings)
    text = joined.encode("utf-8")  # (strict: a lone surrogate fails here, not at the server)
    if len(text) == len(joined):  # ASCII: a character is a byte
        lengths = np.fromiter(map(len, strings), np.int32, len(strings))
    else:
        encoded = [s.encode("utf-8") for s in strings]
        lengths = np.fromiter(map(len, encoded), np.int32, len(strings))
    packed: bytes = msgpack.packb([index.astype("<i4").tobytes(), lengths.astype("<i4").tobytes(),
                                   _cctx().compress(text)], use_bin_type=True)
    return packed


class PackedError(ValueError):
    """A packed text column that breaks the format (the validator names the field)."""


@dataclass(frozen=True)
class PackedText:
    """A packed text column as it came off the wire (`arrays.ext_hook`): not yet checked."""

    data: bytes

    def unpack(self, n: int, max_bytes: int) -> TextColumn:
        """Check its structure against N samples and a text limit (UTF-8 bytes of every
        sample's string, each counted), before decompressing anything: raises PackedError
        saying what is wrong, or TooMuchText. The text itself is checked by `text()`."""
        try:
            parts = msgpack.unpackb(self.data, raw=True)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise PackedError(f"packed text does not decode: {exc}") from None
        if not (isinstance(parts, list) and len(parts) == 3
                and all(isinstance(b, bytes) for b in parts)):
            raise PackedError("packed text must be an array of three byte strings")
        index_b, lengths_b, frame = parts
        if len(index_b) != 4 * n or len(lengths_b) % 4:
            raise PackedError(f"packed text must index {n} samples")
        index = np.frombuffer(index_b, "<i4")
        lengths = np.frombuffer(lengths_b, "<i4").astype(np.int64)
        if index.size and (int(index.min()) < -1 or int(index.max()) >= lengths.size):
            raise PackedError("packed text indexes a string it does not hold")
        if lengths.size and int(lengths.min()) < 0:
            raise PackedError("packed text lengths must not be negative")
        nbytes = int(lengths[index[index >= 0]].sum())
        if nbytes > max_bytes:  # before anything is decompressed
            raise TooMuchText(nbytes)
        size = int(lengths.sum())
        if size > nbytes:  # distinct text beyond the samples' own: bounds what is decompressed
            raise PackedError("packed text holds more text than its samples have")
        if len(frame) > (size + (size >> 7) + 128 if size else 16):  # (zstd needs no more:
            # nothing rides along uncounted; an empty frame is 9 bytes, 13 with a checksum)
            raise PackedError("packed text's frame is larger than its text can compress to")
        try:
            declared = zstandard.frame_content_size(frame)
        except zstandard.ZstdError:
            declared = -2
        if declared != size:
            raise PackedError(f"packed text must be one zstd frame that records its size, "
                              f"the sum of the lengths ({size:,})")
        return TextColumn(self.data, index, lengths, frame, nbytes)

    def values(self) -> list[str | None]:
        """Its strings, one per sample (None: null), trusted as checked (a stored column read
        back, the sender reading its own message): decompressed here, not checked again."""
        index_b, lengths_b, frame = msgpack.unpackb(self.data, raw=True)
        return TextColumn(self.data, np.frombuffer(index_b, "<i4"),
                          np.frombuffer(lengths_b, "<i4").astype(np.int64), frame, 0,
                          checked=True).values()


class TooMuchText(ValueError):
    """More text than the limit allows (`args[0]`: bytes, at least)."""


class TextColumn:
    """A packed text column whose structure is checked: its wire bytes (stored as they came),
    index, lengths and UTF-8 bytes counted. Its text — decompressed, checked to be valid UTF-8
    cut at character boundaries — is `text()`; a large one starts decompressing on a helper
    thread at once (zstd runs without the GIL), so the server stores the message's other
    columns meanwhile and `text()` (before the commit) only waits for what is left."""

    __slots__ = ("data", "index", "lengths", "nbytes", "_frame", "_pending", "_text")

    def __init__(self, data: bytes, index: np.ndarray, lengths: np.ndarray, frame: bytes,
                 nbytes: int, *, checked: bool = False) -> None:
        self.data, self.index, self.lengths, self.nbytes = data, index, lengths, nbytes
        self._frame = frame
        self._text: bytes | None = _dctx().decompress(frame) if checked else None
        self._pending: Future[bytes] | None = None
        pool = _pool() if not checked and len(frame) >= ASYNC_BYTES else None
        if pool is not None:
            try:
                self._pending = pool.submit(_inflate, frame, lengths)
            except RuntimeError:  # the interpreter is shutting down: `text()` does it here
                pass

    def text(self) -> bytes:
        """The UTF-8 text of the distinct strings; raises PackedError when it is not what the
        column says (does not decompress, wrong size, not UTF-8, cut inside a character)."""
        if self._text is None:
            pending, self._pending = self._pending, None
            self._text = (_inflate(self._frame, self.lengths) if pending is None
                          else pending.result())
        return self._text

    def values(self) -> list[str | None]:
        text = self.text()
        ends = np.cumsum(self.lengths)
        starts = (ends - self.lengths).tolist()
        if text.isascii():  # a byte is a character: slice one decoded string
            joined = text.decode("ascii")
            strings: list[str | None] = list(map(joined.__getitem__,
                                                 map(slice, starts, ends.tolist())))
        else:
            view = memoryview(text)
            strings = [bytes(view[a:b]).decode("utf-8", "surrogatepass")
                       for a, b in zip(starts, ends.tolist(), strict=True)]
        strings.append(None)  # index -1
        return list(map(strings.__getitem__, self.index.tolist()))


ASYNC_BYTES = 64 << 10  # a compressed text this large is decompressed on a helper thread
_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor | None:
    """The helper thread that decompresses large texts (None on one core: inline then)."""
    global _helpers
    if _helpers is None and (os.cpu_count() or 1) > 1:
        with _helpers_lock:
            if _helpers is None:
                _helpers = ThreadPoolExecutor(1, thread_name_prefix="wire-texts")
    return _helpers


def _inflate(frame: bytes, lengths: np.ndarray) -> bytes:
    size = int(lengths.sum())
    try:  # one frame, nothing after it
        text = _dctx().decompress(frame, max_output_size=size, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise PackedError(f"packed text does not decompress: {exc}") from None
    if len(text) != size:
        raise PackedError("packed text lengths do not add up to its text")
    if not text.isascii():  # else valid UTF-8 already, cut anywhere
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            raise PackedError("packed text is not valid UTF-8") from None
        starts = (np.cumsum(lengths) - lengths)[lengths > 0]
        if starts.size and (np.frombuffer(text, np.uint8)[starts] & 0xC0 == 0x80).any():
            raise PackedError("packed text cuts a character between two strings")
    return text
