"""The pipeline's cached events of a run (ingest.pipeline.timeline.Growing): blobs appended a
few at a time, each decoded on its own (eventstore.decode_each: its own label lists, integers
in the width it stored them in) and written straight into the cache's columns, hold what
decoding every blob together gives, row for row, and the run's lanes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ingest.core import eventstore as es
from ingest.core import timeline
from ingest.pipeline.timeline import Growing
from tests.unit.test_eventstore import message, random_rows

WITHOUT_IDS = ("sample_id", "group_id")


@pytest.mark.parametrize("seed", range(8))
def test_blobs_appended_in_pieces_hold_what_decoding_them_together_gives(seed: int) -> None:
    rng = random.Random(seed)
    blobs = [es.encode_events(message(random_rows(rng, rng.choice([1, 5, 80, 700])), rng))
             for _ in range(rng.randint(2, 12))]
    cache = Growing()
    done = 0
    while done < len(blobs):
        k = rng.randint(1, 4)
        cache.append(es.decode_each(blobs[done:done + k]))
        done += k
        want = es.decode_events(blobs[:done], ids=False)
        got = cache.table()
        assert got.n == want.n == cache.rows.n
        for name in ("start", "end", "step", "rank", "slot", "tokens", "status"):
            assert getattr(got, name).dtype == getattr(want, name).dtype
        cols_got, cols_want = es.to_columns(got), es.to_columns(want)
        for name in cols_want:
            if name not in WITHOUT_IDS:
                assert cols_got[name] == cols_want[name], name
        assert len(cache.lanes) == timeline.inference_lanes(want)
        assert len(cache.lists["names"]) == len(set(cache.lists["names"]))  # each label once


def test_a_blob_of_another_format_is_refused_one_by_one_too() -> None:
    blob = es.encode_events(message([{"name": "a", "start": 1.0}]))
    bad = blob.replace(b"\xa1v\x02", b"\xa1v\x63", 1)  # "v": 2 -> 99
    assert bad != blob
    with pytest.raises(ValueError, match="format 99"):
        es.decode_each([bad])
    assert np.isnan(es.decode_each([blob])[0].end).all()
