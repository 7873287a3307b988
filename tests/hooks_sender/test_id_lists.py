"""Id columns handed over as lists of ints (what a reward function returns): int64 arrays on
the sender thread (`samples._ids`) and in the hand-off to the sender process
(`handoff._Encoder.ids`), with the same values; a bool among them still refused (or left to
the sender, which refuses it), however the fast path packs it."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_hooks.transport.handoff import EXT_ARRAY, _Encoder
from trainer_hooks.transport.samples import SampleError, _ids


@pytest.mark.parametrize("values", [[5, 6, 7], [0, 1, 2], [1, 0, 1], [2**63 - 1, 0, -4]])
def test_int_lists_become_int64_arrays(values: list[int]) -> None:
    got = _ids(values, len(values), "sample_id")
    assert isinstance(got, np.ndarray) and got.dtype == np.int64
    assert got.tolist() == values
    enc = _Encoder()
    ext = enc.ids(values)
    assert ext.code == EXT_ARRAY
    assert np.frombuffer(enc.buffers[0], dtype="<i8").tolist() == values


@pytest.mark.parametrize("values", [[1, True, 3], [0, False], [4, 5, True]])
def test_a_bool_among_int_ids_is_refused(values: list[object]) -> None:
    with pytest.raises(SampleError, match="is not an id"):
        _ids(values, len(values), "group_id")
    enc = _Encoder()
    assert enc.ids(values) == values  # handed over as they are: the sender refuses them
    assert not enc.buffers


def test_other_int_lists_keep_their_way() -> None:
    assert _ids([1, "a", 3], 3, "sample_id") == [1, "a", 3]
    assert _ids([1, 2**70], 2, "sample_id") == [1, 2**70]  # beyond int64: a list
    assert _ids([3, np.int64(4)], 2, "sample_id").tolist() == [3, 4]
    with pytest.raises(SampleError, match="reward has 4"):
        _ids([1, 2, 3], 4, "sample_id")
