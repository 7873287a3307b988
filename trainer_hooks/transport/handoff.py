"""The hand-off between a trainer and its sender process (`connect(..., sender="process")`,
`transport.helper`): the log calls, written once into shared memory.

**Ring.** A shared-memory file (`memfd` on Linux, else an unlinked temporary file) mapped by
both processes: a header page, then `RING_BYTES` of records written one after another, each
prefixed by its length, wrapping (a record that does not fit before the end starts at the
beginning, after a zero length). The trainer writes a record, then its write position in the
header; the helper reads records up to that position, copies each out and publishes how far it
has read, so the trainer may reuse the space. A log call makes no system call: the helper
looks at the ring every LOOK seconds while records come, and only once it has been idle for
IDLE seconds does it sleep on the doorbell pipe, which the trainer then rings (and always for
a request: flush, sync, status, stop). Where another core may see stores out of order (not
x86) every record rings it: the system call orders the record before the helper's read. A
record larger than half the ring travels through the bulk pipe (its length stays in the
ring). The doorbell's end of file tells the helper that the trainer is gone.

**Records.** One log call each: msgpack of `[kind, fields...]` (a `StepCall` "s", a
`SamplesCall` "m", any other call or control record pickled: "p"), in which a numpy array is
an extension value (code 1: its dtype and size) whose bytes follow the msgpack part, copied
once from the caller's array into the ring; a list of strings (environment names, texts) is
one NUL-joined UTF-8 string (code 2: an eighth of msgpack's cost for 512 short strings), and
any other value msgpack does not take is pickled (code 9). The helper gets back equal values:
arrays (read-only), the strings' list, the objects.

The header (little-endian uint64s): `consumed_pos` (ring bytes the helper has read),
`queued` (records it handed to its sender engine), `sealed` (of those, records whose messages
are in its outbox: the engine took them in a finished pump pass). On the helper's death its
successor reads on from `consumed_pos`, and the trainer counts `queued − sealed` as lost
(`transport.helper`).
"""

from __future__ import annotations

import functools
import mmap
import os
import pickle
import platform
import select
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import msgpack
import numpy as np

from trainer_hooks.transport.queue import Call, SamplesCall, StepCall
from trainer_hooks.transport.samples import ints_only

RING_BYTES = 32 << 20
HEADER_BYTES = 4096
BULK = 1 << 31  # a record's length flag: its bytes follow in the bulk pipe
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_PREFIX = struct.Struct("<II")  # a record's length (this prefix included), its msgpack's
_WRAP = _U32.pack(0)
_HEAD = struct.Struct("<QQQ")  # at 0, the helper's: consumed_pos, queued, sealed
WRITTEN, SLEEPING = 64, 128  # the trainer's write position; the helper waits on the bell
LOOK, IDLE = 0.01, 0.5  # the helper looks this often while records come; sleeps after idle
# Where stores may be seen out of order by another core (not x86), every record rings the
# doorbell: the system call orders the record before the helper's read of it.
_ORDERED_BY_SYSCALL = platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686")
EXT_ARRAY, EXT_STRINGS, EXT_PICKLE = 1, 2, 9
PIPE_BYTES = 1 << 20  # the bulk pipe's capacity where Linux allows it


def make_ring(size: int = RING_BYTES) -> int:
    """A file descriptor of `HEADER_BYTES + size` bytes of shared memory."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("telescope-handoff")  # (close-on-exec: pass_fds hands it on)
    else:  # pragma: no cover - not Linux
        f = tempfile.TemporaryFile()
        fd = os.dup(f.fileno())
        f.close()
    os.ftruncate(fd, HEADER_BYTES + size)
    return fd


def _mapped(fd: int, size: int) -> mmap.mmap:
    """The ring mapped with its pages present (Linux: MAP_POPULATE), so that a log call never
    takes the page faults of memory touched for the first time."""
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
    return mmap.mmap(fd, size, flags=flags)


def widen(fd: int) -> None:
    """A larger pipe buffer (Linux; elsewhere the default)."""
    setpipe = getattr(__import__("fcntl"), "F_SETPIPE_SZ", None)
    if setpipe is not None:
        try:
            __import__("fcntl").fcntl(fd, setpipe, PIPE_BYTES)
        except OSError:
            pass


# ---------------------------------------------------------------- encoding (trainer)

# the dtypes whose bytes cross raw (numbers, booleans, fixed-width strings of any length are
# looked up by dtype: numpy caches those objects), with their tags
_DTYPES: dict[np.dtype[Any], bytes] = {
    np.dtype(c): np.dtype(c).str.encode() for c in "?bhilqBHILQefdgFDG"}


_new, _Ext = tuple.__new__, msgpack.ExtType


def _ext(code: int, data: bytes) -> msgpack.ExtType:
    """An ExtType built in C (its Python `__new__` checks cost ~1 µs each)."""
    ext: msgpack.ExtType = _new(_Ext, (code, data))
    return ext



class _Encoder:
    """Encodes a call into msgpack plus the arrays' raw buffers (see the module docstring)."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []
        self.packer = msgpack.Packer(default=self.default, use_bin_type=True,
                                     autoreset=True)

    def default(self, obj: Any) -> Any:
        if type(obj) is np.ndarray and obj.ndim == 1:
            tag = _DTYPES.get(obj.dtype)
            if tag is not None:
                self.buffers.append(obj)
                return _ext(EXT_ARRAY, _U64.pack(obj.nbytes) + tag)
        if type(obj) is _Strings:
            return _ext(EXT_STRINGS, obj.data)
        if hasattr(obj, "detach") and hasattr(obj, "numpy"):  # a tensor: numpy here
            return self.default(obj.detach().cpu().numpy())
        try:
            return _ext(EXT_PICKLE, pickle.dumps(obj, protocol=5))
        except Exception:  # noqa: BLE001 - the sender names what it cannot store
            return _ext(EXT_PICKLE, pickle.dumps(Opaque(type(obj).__name__)))

    def column(self, value: Any) -> Any:
        """A `log_samples` argument made ready for the packer without its `default` hook (a
        call back from C per array costs more than these checks)."""
        kind = type(value)
        if kind is np.ndarray:
            tag = _DTYPES.get(value.dtype) if value.ndim == 1 else None
            if tag is None:
                return value  # (the hook decides)
            self.buffers.append(value)
            return _new(_Ext, (EXT_ARRAY, _U64.pack(value.nbytes) + tag))
        if kind is list:
            return _strings(value)
        if kind is dict:
            return {k: self.numbers(v) for k, v in value.items()}
        return value

    def numbers(self, value: Any) -> Any:
        """A number column: a list of Python numbers packed as float64 in one C call (as the
        sender thread converts it, `samples._floats`: the same values), else as `column`."""
        if type(value) is list and value and type(value[0]) in _NUMBERS:
            packed = _packed(value, "d")
            if packed is not None:
                self.buffers.append(packed)
                return _new(_Ext, (EXT_ARRAY, _U64.pack(packed.nbytes) + b"<f8"))
        return self.column(value)

    def ids(self, value: Any) -> Any:
        """An id column: a list of Python ints only (no bools: those are no ids) as int64,
        as the sender thread converts it (`samples._ids`, `samples._int_ids`), else as
        `column`."""
        if type(value) is list and value and type(value[0]) is int:
            packed = _packed(value, "q")
            if packed is not None and ints_only(value, np.frombuffer(packed, dtype="<u8")):
                self.buffers.append(packed)
                return _new(_Ext, (EXT_ARRAY, _U64.pack(packed.nbytes) + b"<i8"))
        return self.column(value)

    def samples(self, call: SamplesCall) -> list[Any]:
        """A SamplesCall's record fields: the common cases inline (one frame for the whole
        call: after a training step's kernels every Python call is a cold one), the rest by
        `ids`, `numbers` and `column`."""
        out: list[Any] = ["m"]
        add, buffers = out.append, self.buffers
        for way, value in zip(_SAMPLE_FIELDS, call, strict=True):
            kind = type(value)
            if value is None or kind is int or kind is float or kind is str:
                add(value)
            elif kind is np.ndarray and value.ndim == 1 and value.dtype in _DTYPES:
                buffers.append(value)
                add(_new(_Ext, (EXT_ARRAY, _U64.pack(value.nbytes) + _DTYPES[value.dtype])))
            elif way is _Encoder.column and kind is list:
                add(_strings(value))
            elif kind is dict:
                metrics = {}
                for name, column in value.items():
                    if type(column) is np.ndarray and column.ndim == 1 \
                            and column.dtype in _DTYPES:
                        buffers.append(column)
                        metrics[name] = _new(_Ext, (EXT_ARRAY, _U64.pack(column.nbytes)
                                                    + _DTYPES[column.dtype]))
                    else:
                        metrics[name] = self.numbers(column)
                add(metrics)
            else:
                add(way(self, value))
        return out

    def encode(self, call: Call) -> tuple[bytes, list[Any]]:
        self.buffers = []
        kind = type(call)
        try:
            if kind is SamplesCall:
                return self.packer.pack(self.samples(cast(SamplesCall, call))), self.buffers
            if kind is StepCall:
                return self.packer.pack(["s", *call]), self.buffers
        except (OverflowError, TypeError, ValueError):  # (an int beyond 64 bits): pickled
            self.buffers = []
        return self.packer.pack(["p", _ext(EXT_PICKLE, pickle.dumps(call, protocol=5))]), \
            self.buffers


# how each field of a SamplesCall is made ready (`_Encoder`), in the record's order
_SAMPLE_FIELDS = tuple(
    _Encoder.ids if name in ("sample_id", "group_id") else
    _Encoder.numbers if name in ("reward", "advantage", "prompt_tokens", "completion_tokens",
                                 "off_policy_steps", "time") else _Encoder.column
    for name in SamplesCall._fields)
_NUMBERS = (float, int)


@functools.lru_cache(maxsize=64)
def _layout(n: int, code: str) -> struct.Struct:
    return struct.Struct(f"<{n}{code}")


def _packed(values: list[Any], code: str) -> memoryview | None:
    """A list of Python numbers as little-endian float64 (`code` "d") or int64 ("q") bytes,
    in one C call; None when some value is not a number struct takes (None, a string, an int
    beyond int64): the list then goes as it is, and the sender decides, as for the thread."""
    try:
        return memoryview(_layout(len(values), code).pack(*values))
    except (struct.error, TypeError, OverflowError):
        return None


class Opaque:
    """A value that cannot cross to the sender process (it does not pickle): the sender
    leaves it out as it would any value it cannot store, named by its type."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"<{self.kind}>"


class _Strings:
    """A list of strings, NUL-joined (`EXT_STRINGS`)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _strings(values: list[Any]) -> Any:
    """A list of strings as one `_Strings` when that is exact (no NUL in them, all str), else
    the list as it is."""
    try:
        joined = "\0".join(values)
    except TypeError:
        return values
    if not values or joined.count("\0") != len(values) - 1:  # (a NUL within a string)
        return values
    try:
        return _Strings(joined.encode())
    except UnicodeEncodeError:  # a lone surrogate: the sender replaces it, as for a list
        return values


# ---------------------------------------------------------------- decoding (helper)


def decode(record: bytes | bytearray | memoryview) -> Call:
    """A record back to its call (the helper's side; or whatever else was pickled into a
    record: the helper's requests)."""
    view = memoryview(record)
    (head_len,) = _U32.unpack_from(view, 4)
    offset = 8 + head_len
    where = [offset]

    def ext(code: int, data: bytes) -> Any:
        if code == EXT_ARRAY:
            (nbytes,) = _U64.unpack_from(data, 0)
            dtype = np.dtype(data[8:].decode())
            at = where[0]
            where[0] = at + nbytes
            return np.frombuffer(view[at:at + nbytes], dtype=dtype)
        if code == EXT_STRINGS:
            return data.decode().split("\0")
        if code == EXT_PICKLE:
            return pickle.loads(data)
        return msgpack.ExtType(code, data)

    fields = msgpack.unpackb(view[8:8 + head_len], ext_hook=ext, raw=False,
                             strict_map_key=False, use_list=True)
    kind = fields[0]
    if kind == "m":
        return SamplesCall._make(fields[1:])
    if kind == "s":
        return StepCall._make(fields[1:])
    call: Call = fields[1]
    return call


# ---------------------------------------------------------------- the trainer's writer


class Writer:
    """The trainer's end: `put(call)` writes one record. Any thread (one lock)."""

    def __init__(self, ring_fd: int, size: int = RING_BYTES) -> None:
        self.size = size
        self.map = _mapped(ring_fd, HEADER_BYTES + size)
        self.lock = threading.Lock()
        self.written = _U64.unpack_from(self.map, WRITTEN)[0]  # ring bytes written (gaps too)
        self.limit = size  # written may reach this without reading the header again
        self.encoder = _Encoder()
        self.bell = self.bulk = -1

    def attach(self, bell_fd: int, bulk_fd: int) -> None:
        """Wake a (new) helper through `bell_fd`, send it large records through `bulk_fd`."""
        with self.lock:
            old = (self.bell, self.bulk)
            self.bell, self.bulk = bell_fd, bulk_fd
        for fd in old:  # a dead helper's: closed only now, so no write meets a reused number
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def consumed(self) -> int:
        """Ring bytes the helper has read (from the header)."""
        pos: int = _U64.unpack_from(self.map, 0)[0]
        self.limit = pos + self.size
        return pos

    def counters(self) -> tuple[int, int, int]:
        """The header: (consumed_pos, queued, sealed)."""
        consumed, queued, sealed = _HEAD.unpack_from(self.map, 0)
        return consumed, queued, sealed

    def put(self, call: Any, room: Callable[[], bool], *, urgent: bool = False) -> None:
        """Write `call` (encoding it; raises what encoding raises) and wake the helper when it
        sleeps (always when `urgent`: a request). When the ring is full, waits while `room()`
        (which sleeps a little and says whether to keep waiting) is True; raises
        BrokenPipeError when it says stop."""
        head, buffers = self.encoder.encode(call)
        n = 8 + len(head) + sum(b.nbytes for b in buffers)
        with self.lock:
            bulk = n > self.size // 2
            at = self.written
            pos = at % self.size
            need = 8 if bulk else n
            if pos + need > self.size:  # wraps: the record starts at the ring's beginning
                if self.size - pos >= 4:
                    self.map[HEADER_BYTES + pos:HEADER_BYTES + pos + 4] = _WRAP
                at += self.size - pos
                pos = 0
            while at + need > self.limit and at + need > self.consumed() + self.size:
                if not room():
                    raise BrokenPipeError("the sender process is gone")
            m, base = self.map, HEADER_BYTES + pos
            m[base:base + 8] = _PREFIX.pack((n | BULK) if bulk else n, len(head))
            if not bulk:
                m[base + 8:base + 8 + len(head)] = head
                p = base + 8 + len(head)
                for b in buffers:
                    try:
                        m[p:p + b.nbytes] = b
                    except (BufferError, ValueError, TypeError):  # not contiguous
                        m[p:p + b.nbytes] = np.ascontiguousarray(b).data.cast("B")
                    p += b.nbytes
            self.written = at + need
            _U64.pack_into(m, WRITTEN, self.written)  # (after the record: x86 keeps the order)
            if urgent or bulk or _ORDERED_BY_SYSCALL or _U64.unpack_from(m, SLEEPING)[0]:
                _write_all(self.bell, b"\0")
            if bulk:
                _write_all(self.bulk, b"".join(
                    [head, *(np.ascontiguousarray(b).tobytes() for b in buffers)]))

    def close(self) -> None:
        self.map.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ---------------------------------------------------------------- the helper's reader


class Reader:
    """The helper's end: `records()` yields each record's bytes in order (sleeping on the
    doorbell pipe, at most `poll` seconds at a time, when there are none) until the trainer's
    end of the doorbell closes and the ring is read."""

    def __init__(self, ring_fd: int, bell_fd: int, bulk_fd: int, start: int,
                 size: int = RING_BYTES, poll: float = 0.05) -> None:
        self.size, self.poll = size, poll
        self.map = _mapped(ring_fd, HEADER_BYTES + size)
        self.bell = bell_fd
        self.bulk = os.fdopen(bulk_fd, "rb", buffering=0)
        self.read = start
        self.queued = self.sealed = 0
        self.lock = threading.Lock()
        self.publish()

    def records(self) -> Iterator[bytes]:
        size, m = self.size, self.map
        open_ = True
        seen, idle = -1, time.monotonic()
        while True:
            written = _U64.unpack_from(m, WRITTEN)[0]
            while self.read < written:
                pos = self.read % size
                if size - pos < 8 or _U32.unpack_from(m, HEADER_BYTES + pos)[0] == 0:
                    self.read += size - pos  # (a wrap marker, or no room for one)
                    continue
                n, head_len = _PREFIX.unpack_from(m, HEADER_BYTES + pos)
                if n & BULK:
                    self.read += 8
                    data = _read_all(self.bulk, (n & ~BULK) - 8)
                    if data is None:
                        return
                    record = _PREFIX.pack(n & ~BULK, head_len) + data
                else:
                    base = HEADER_BYTES + pos
                    record = m[base:base + n]  # (one copy: the arrays read it)
                    self.read += n
                yield record
            if not open_:
                return  # the trainer is gone and everything it wrote is read
            now = time.monotonic()
            idle = now if written != seen else idle
            seen = written
            # While records come (a training loop), look every LOOK seconds without asking for
            # the bell: the trainer then pays no system call per record. Idle for IDLE
            # seconds: sleep until the bell (or `poll`).
            sleep = now - idle > IDLE
            if sleep:
                _U64.pack_into(m, SLEEPING, 1)
            if _U64.unpack_from(m, WRITTEN)[0] == self.read:
                ready, _, _ = select.select([self.bell], [], [], self.poll if sleep else LOOK)
                if ready:
                    open_ = bool(os.read(self.bell, 4096))
            if sleep:
                _U64.pack_into(m, SLEEPING, 0)

    def publish(self) -> None:
        """Tell the trainer how far this helper has read, queued and sealed (any thread)."""
        with self.lock:
            _HEAD.pack_into(self.map, 0, self.read, self.queued, self.sealed)


def _read_all(f: Any, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        chunk = f.read(left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
