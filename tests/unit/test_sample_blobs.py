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


# ------------------------------------------------------- the message's steps encoded at once

FLOAT_COLUMNS = columns.FLOAT_COLUMNS
STRING_COLUMNS = columns.STRING_COLUMNS


def _reference(s: Any) -> list[tuple[int, int, bytes]]:
    """The encoder as it was before it worked on whole messages: step by step, each part's
    columns gathered, checked and packed alone. `encode_steps` must give its bytes exactly."""
    step = s.step
    order = np.argsort(step, kind="stable")
    steps = step[order]
    starts = np.flatnonzero(np.diff(steps, prepend=steps[0] - 1)).tolist()
    ends = [*starts[1:], steps.size]
    packer = msgpack.Packer(use_bin_type=True)
    out = []
    for a, b in zip(starts, ends, strict=True):
        idx = order[a:b]
        m: dict[str, Any] = {"n": b - a}
        for name in FLOAT_COLUMNS:
            col = getattr(s, name)
            if col is not None:
                data = np.ascontiguousarray(col[idx], dtype="<f8")
                bits = data.view("<i8")
                m[name] = ({"k": data[:1].tobytes()} if bits.size > 1
                           and bool((bits == bits[0]).all()) else data.tobytes())
        for name in STRING_COLUMNS:
            col = getattr(s, name)
            if col is None:
                continue
            if col.dtype.kind == "i":
                v = np.ascontiguousarray(col[idx], dtype="<i8")
                n, first, span = v.size, int(v[0]), int(v[-1]) - int(v[0]) + 1
                if n > 1 and 0 < span <= n and n % span == 0 and bool(
                        (v == first + np.arange(n, dtype=np.int64) // (n // span)).all()):
                    m[name] = {"r": [first, n // span]}
                else:
                    m[name] = {"i": v.tobytes()}
            else:
                uniques, codes = columns.dictionary(s, name)
                used, local = np.unique(codes[idx], return_inverse=True)
                m[name] = {"u": uniques[used].tolist()}
                if used.size > 256:
                    m[name]["c"] = local.astype("<i4").tobytes()
                elif used.size > 1:
                    m[name]["b"] = local.astype(np.uint8).tobytes()
        m["metrics"] = {k: np.ascontiguousarray(v[idx], dtype="<f8").tobytes()
                        for k, v in s.metrics.items()}
        out.append((int(steps[a]), b - a, packer.pack(m)))
    return out


def _ids(rng: np.random.Generator, n: int, kind: int) -> list[Any]:
    if kind == 0:  # counting up, each id k times
        k = int(rng.choice([1, 2, 4]))
        return [int(x) for x in 1000 + np.arange(n) // k]
    if kind == 1:  # random integers, the extremes of int64 among them
        v = rng.integers(-5, 5, n).tolist()
        v[0] = 2**63 - 1
        v[-1] = -(2**63)
        return v
    if kind == 2:  # strings, all distinct
        return [f"s{i}" for i in rng.permutation(n).tolist()]
    return [f"g{i % 3}" for i in range(n)]  # strings, few


@pytest.mark.parametrize("seed", range(40))
def test_a_message_of_many_steps_is_stored_as_its_steps_were_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 2, 7, 64, 300, 700]))
    n_steps = int(rng.integers(1, min(n, 9) + 1))
    step = np.sort(rng.integers(0, n_steps, n)) if seed % 3 else rng.integers(0, n_steps, n)
    step[:n_steps] = np.arange(n_steps) if seed % 5 == 0 else step[:n_steps]
    envs = [["math"], ["math", "code"], [f"e{i}" for i in range(300)]][seed % 3]
    obj: dict[str, Any] = {
        "v": 1, "type": "samples", "id": "m", "run": "r", "step": step.tolist(),
        "sample_id": _ids(rng, n, seed % 4), "group_id": _ids(rng, n, (seed // 4) % 4),
        "reward": rng.random(n).tolist(),
        "env": [envs[i % len(envs)] for i in range(n)],
        "time": ([1.7e9] * n if seed % 2 else rng.choice([1.0, 2.0], n).tolist()),
        "metrics": {"len": rng.integers(0, 3, n).astype(float).tolist(),
                    "zero": ([0.0] * (n - 1) + [-0.0]) if n > 1 else [0.0]},
    }
    if seed % 4 == 1:
        obj["advantage"] = [float("nan")] * n
        obj["discard_reason"] = [None if i % 2 else "max_async" for i in range(n)]
        obj["stop_reason"] = ["length"] * n
    s = validate_message(obj)
    got = columns.encode_steps(s)
    assert [(a, b, bytes(c)) for a, b, c in got] == _reference(s)
    # and each reads back as the step's samples, in the message's order
    for st, size, blob in got:
        idx = np.flatnonzero(s.step == st)
        back = columns.decode_batch(blob)
        assert size == idx.size
        assert back["reward"].tobytes() == s.reward[idx].tobytes()
        assert back["env"].tolist() == s.env[idx].tolist()


@pytest.mark.parametrize("distinct", [255, 256, 257])
def test_one_byte_codes_hold_up_to_256_values(distinct: int) -> None:
    names = [f"e{i:03d}" for i in range(distinct)]
    s = samples(2 * distinct, env=names + names, step=[3] * distinct + [4] * distinct)
    got = columns.encode_steps(s)
    assert [(a, b, bytes(c)) for a, b, c in got] == _reference(s)
    assert all(("b" in msgpack.unpackb(blob)["env"]) == (distinct <= 256)
               for _, _, blob in got)
