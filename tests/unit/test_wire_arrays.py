"""Typed number arrays in msgpack frames (trainer_hooks.wire.arrays): a samples message packed
with them validates to exactly what its list form gives, and every malformed array is an
error naming its field."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest

from trainer_hooks.wire import arrays
from trainer_hooks.wire import protocol as p

N = 6


def message(**over: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "v": 1, "id": "m1", "type": "samples", "run": "r",
        "step": np.array([3, 3, 3, 4, 4, 4]), "sample_id": np.arange(N) + 10,
        "group_id": np.repeat(np.arange(2), 3),
        "reward": np.array([0.5, np.nan, 1.0, np.inf, -2.0, 0.0]),
        "completion_tokens": np.array([10.0, 20, 30, 40, 50, 60]),
        "env": "e", "metrics": {"m": np.linspace(0, 1, N), "k": np.arange(N, dtype=np.int32)},
    }
    msg.update(over)
    return msg


def decoded(msg: dict[str, Any]) -> Any:
    return p.decode_frame(p.encode_msgpack(msg), binary=True)


def as_lists(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: as_lists(v) for k, v in obj.items()}
    return obj.tolist() if isinstance(obj, np.ndarray) else obj


def test_number_arrays_travel_as_typed_arrays() -> None:
    body = p.encode_msgpack(message())
    raw = msgpack.unpackb(body, raw=False)
    assert raw["reward"] == msgpack.ExtType(arrays.FLOAT64, message()["reward"].tobytes())
    assert raw["sample_id"].code == arrays.INT64 and raw["metrics"]["k"].code == arrays.INT64
    assert len(body) < 8 * N * 7 + 200  # 8 bytes a number, no per-item overhead beyond that


def test_typed_arrays_validate_like_lists() -> None:
    typed = p.validate_message(decoded(message()))
    listed = p.validate_message(as_lists(decoded(message())))
    assert isinstance(typed, p.Samples) and isinstance(listed, p.Samples)
    for name in ("step", "sample_id", "group_id", "reward", "completion_tokens"):
        np.testing.assert_array_equal(getattr(typed, name), getattr(listed, name))
        assert getattr(typed, name).dtype == getattr(listed, name).dtype, name
    assert typed.metrics.keys() == listed.metrics.keys()
    for k in typed.metrics:
        np.testing.assert_array_equal(typed.metrics[k], listed.metrics[k])
    assert np.isnan(typed.reward[[1, 3]]).all()  # NaN and inf: no value, as in lists


def test_decoded_arrays_are_writable_copies() -> None:
    got = decoded(message())["reward"]
    got[0] = 7.0  # frombuffer alone would be read-only
    assert got.dtype == np.float64


@pytest.mark.parametrize(("field", "value", "code"), [
    ("reward", msgpack.ExtType(arrays.FLOAT64, b"\0" * 7), "wrong_type"),  # not 8-byte items
    ("reward", msgpack.ExtType(9, b"\0" * 8 * N), "wrong_type"),  # unknown extension
    ("sample_id", np.arange(N + 1), "length_mismatch"),
    ("advantage", np.zeros(N - 1), "length_mismatch"),
    ("sample_id", np.arange(N, dtype=np.float64), "wrong_type"),
    ("step", np.arange(N, dtype=np.float64), "wrong_type"),
    ("step", np.arange(N) - 1, "invalid"),
    ("env", np.zeros(N), "wrong_type"),
    ("stop_reason", np.zeros(N), "wrong_type"),
    ("prompt", np.zeros(N), "wrong_type"),
])
def test_malformed_typed_arrays_name_their_field(field: str, value: Any, code: str) -> None:
    msg = message(**{field: value})
    if field == "reward":  # every other column's length is checked against reward's
        msg.update(completion_tokens=None, metrics=None, step=3, sample_id=list(range(len(
            value) if isinstance(value, np.ndarray) else N)), group_id=0)
        msg = {k: v for k, v in msg.items() if v is not None}
    with pytest.raises(p.ProtocolError) as err:
        p.validate_message(decoded(msg))
    assert err.value.field == field and err.value.code == code


def test_a_metric_column_error_names_the_metric() -> None:
    with pytest.raises(p.ProtocolError) as err:
        p.validate_message(decoded(message(metrics={"m": np.zeros(N - 2)})))
    assert err.value.field == "metrics.m"


def test_typed_arrays_are_not_config_values() -> None:
    start = {"v": 1, "id": "s", "type": "run.start", "run": "r",
             "config": {"w": msgpack.ExtType(arrays.FLOAT64, np.zeros(3).tobytes())}}
    with pytest.raises(p.ProtocolError) as err:
        p.validate_message(p.decode_frame(msgpack.packb(start), binary=True))
    assert err.value.field == "config"


def test_a_refused_message_splits_along_its_typed_arrays() -> None:
    halves = p.split(decoded(message()))
    assert halves is not None
    assert [h["reward"].size for h in halves] == [3, 3]
    assert all(p.validate_message(h) for h in halves)
