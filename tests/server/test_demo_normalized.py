"""The demo run's normalized all-environment reward is the pooled mean of every sample's own
normalized value (the bug: the raw mean stretched by the widest range)."""

from __future__ import annotations

import pytest

from ingest.core.columns import decode_batch
from ingest.models import Project, SampleBatch
from ingest.pipeline.materialize import materialize_all
from ingest.write.demo import ENVIRONMENTS, demo_messages
from ingest.write.frames import handle_object
from tests.support.points import point_rows, values

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_demo_normalized_reward_pools_each_samples_own_value() -> None:
    project = Project.objects.create(name="demo").pk
    for msg in demo_messages("grpo-demo", 200, start=0.0):
        assert handle_object(project, msg).reply["type"] == "ack"
    materialize_all()
    bounds = {e["name"]: (e["reward_min"], e["reward_max"]) for e in ENVIRONMENTS}
    mapped, raw = [], []
    for blob in SampleBatch.objects.filter(step=199).values_list("data", flat=True):
        batch = decode_batch(blob)
        for env, reward, discard in zip(batch["env"], batch["reward"],
                                        batch.get("discard_reason", [""] * batch["n"]),
                                        strict=True):
            if discard == "":
                lo, hi = bounds[str(env)]
                mapped.append((reward - lo) / (hi - lo))
                raw.append(reward)

    rows = point_rows()

    def stored(sid: str) -> float:
        return values(rows, sid=sid)[199]

    pooled = sum(mapped) / len(mapped)
    assert stored("reward|reward|norm%3Amean|") == pytest.approx(pooled)
    widest = (sum(raw) / len(raw) - 0.0) / (2.0 - 0.0)  # what the page used to show
    assert abs(widest - pooled) > 0.05
