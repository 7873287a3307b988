"""Typed number arrays in msgpack frames (docs/protocol.md, "Typed arrays").

A number column of a binary frame may be one msgpack extension value instead of a list:
ext type 1 holds little-endian float64 values, ext type 2 little-endian int64 values, 8 bytes
each, nothing else. Packing and unpacking them is one copy of the bytes, where a list of N
numbers costs N msgpack items and N Python objects on each side. The server accepts both
forms wherever a list of numbers is allowed; JSON frames have lists only.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import msgpack
import numpy as np

from trainer_hooks.wire.texts import TEXT, PackedText

FLOAT64, INT64 = 1, 2
_DTYPES = {FLOAT64: "<f8", INT64: "<i8"}


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack `ext_hook`: a typed array as a (writable, native-order) numpy array; a packed
    text column (`trainer_hooks.wire.texts`) as a `PackedText`, checked by the validator; any
    other extension value, or one whose length is not a multiple of 8, stays an `ExtType`
    (which no field accepts: the validator names the field)."""
    if code == TEXT:
        return PackedText(data)
    dtype = _DTYPES.get(code)
    if dtype is None or len(data) % 8:
        return msgpack.ExtType(code, data)
    return np.frombuffer(data, dtype=dtype).astype(dtype[1:])


def packable(value: Any) -> Any:
    """A value as msgpack packs it: a 1-D float or integer numpy array as a typed array, any
    other numpy value as plain Python (`tolist`), anything else unchanged."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        kind = value.dtype.kind
        if kind == "f":
            return msgpack.ExtType(FLOAT64, value.astype("<f8", copy=False).tobytes())
        if kind == "i" or (kind == "u" and (not value.size or int(value.max()) < 2**63)):
            return msgpack.ExtType(INT64, value.astype("<i8", copy=False).tobytes())
    tolist = getattr(value, "tolist", None)
    return tolist() if tolist is not None else value


def is_array(value: Any) -> TypeGuard[np.ndarray]:
    """A typed array as `ext_hook` returns it."""
    return isinstance(value, np.ndarray) and value.ndim == 1
