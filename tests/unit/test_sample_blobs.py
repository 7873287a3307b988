"""A stored batch of samples (ingest.core.columns): the short forms of a column (one value for
all, ids that count up, one-byte or absent dictionary codes) read back exactly as the long
forms do, and batches in the long forms (stored before the short ones) still read."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np
import pytest

from ingest.core import columns
from trainer_hooks.wire.protocol import validate_message


def samples(n: int = 64, **columns_: Any) -> Any:
    obj: dict[str, Any] = {
        "v": 1, "type": "samples", "id": "m", "run": "r", "step": 3,
        "sample_id": list(range(100, 100 + n)), "group_id": [7 + i // 4 for i in range(n)],
        "reward": [math.sin(i) for i in range(n)], "time": [1.7e9] * n,
        "env": ["math" if i % 3 else "code" for i in range(n)],
        "metrics": {"len": [float(i % 5) for i in range(n)]},
    }
    obj.update(columns_)
    return validate_message(obj)


def one(s: Any) -> tuple[bytes, dict[str, Any]]:
    [(_, _, blob)] = columns.encode_steps(s)
    return blob, msgpack.unpackb(blob, raw=False)


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys() and a["n"] == b["n"]
    for k in a:
        if k == "metrics":
            assert a[k].keys() == b[k].keys()
            for m in a[k]:
                assert a[k][m].tobytes() == b[k][m].tobytes()
        elif k != "n":
            assert a[k].dtype == b[k].dtype
            assert (a[k].tobytes() if a[k].dtype.kind != "U" else a[k].tolist()) == \
                (b[k].tobytes() if b[k].dtype.kind != "U" else b[k].tolist())


def test_the_short_forms_are_used_and_read_back_exactly() -> None:
    s = samples(discard_reason=[None] * 64)
    blob, stored = one(s)
    assert stored["time"] == {"k": np.float64(1.7e9).tobytes()}
    assert stored["sample_id"] == {"r": [100, 1]}
    assert stored["group_id"] == {"r": [7, 4]}
    assert set(stored["env"]) == {"u", "b"} and len(stored["env"]["b"]) == 64
    assert set(stored["discard_reason"]) == {"u"}  # one value: no codes
    got = columns.decode_batch(blob)
    assert got["time"].tolist() == [1.7e9] * 64
    assert got["sample_id"].tolist() == list(range(100, 164))
    assert got["group_id"].tolist() == [7 + i // 4 for i in range(64)]
    assert got["env"].tolist() == ["math" if i % 3 else "code" for i in range(64)]
    assert got["discard_reason"].tolist() == [""] * 64
    assert got["reward"].tolist() == [math.sin(i) for i in range(64)]


@pytest.mark.parametrize("values", [
    [0.0] * 31 + [-0.0],  # equal, not the same bits: kept apart
    [float("nan")] * 32,  # one value (NaN), bit for bit
    [1.0, 2.0] * 16,
])
def test_a_float_column_keeps_its_bits(values: list[float]) -> None:
    s = samples(32, time=values, sample_id=list(range(32)), group_id=list(range(32)))
    blob, stored = one(s)
    want = np.array(values, dtype="<f8").tobytes()
    assert isinstance(stored["time"], dict) == (len(set(want[i:i + 8] for i in
                                                          range(0, len(want), 8))) == 1)
    assert columns.decode_batch(blob)["time"].tobytes() == want
    assert columns.unpack(blob)["time"] == want


@pytest.mark.parametrize("ids", [
    [5, 6, 8, 9], [3, 3, 3, 4], [9, 8, 7, 6], [1, 1, 2, 2, 3], [-2, -1, 0, 1], [4, 4, 4, 4],
    [2**62, 2**62 + 1, 2**62 + 2, 2**62 + 3],
])
def test_ids_are_stored_as_they_are_unless_they_count_up(ids: list[int]) -> None:
    n = len(ids)
    s = samples(n, sample_id=ids, group_id=ids)
    blob, stored = one(s)
    counts_up = any(n % k == 0 and ids == [ids[0] + i // k for i in range(n)]
                    for k in range(1, n + 1))  # each id k times, the last too
    assert ("r" in stored["sample_id"]) == counts_up
    assert columns.decode_batch(blob)["sample_id"].tolist() == ids
    assert np.frombuffer(columns.unpack(blob)["group_id"]["i"], dtype="<i8").tolist() == ids


def test_a_dictionary_of_many_values_keeps_four_byte_codes() -> None:
    names = [f"e{i}" for i in range(300)]
    s = samples(600, env=names + names)
    blob, stored = one(s)
    assert "c" in stored["env"] and "b" not in stored["env"]
    assert columns.decode_batch(blob)["env"].tolist() == names + names


def test_a_batch_stored_in_the_long_forms_reads_the_same() -> None:
    s = samples(discard_reason=[None] * 64)
    blob, _ = one(s)
    raw = columns.unpack(blob)  # the long forms, as batches were stored before
    old = msgpack.packb(raw, use_bin_type=True)
    assert len(blob) < 0.85 * len(old)
    same(columns.decode_batch(old), columns.decode_batch(blob))
    a, la = columns.assemble_steps([[columns.unpack(old)]])
    b, lb = columns.assemble_steps([[columns.unpack(blob)]])
    assert la.tobytes() == lb.tobytes()
    for name in ("reward", "group", "env", "discard"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
    assert a.env_names == b.env_names
