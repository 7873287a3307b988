"""The embedded channel layer never drops a slow page from its runs' groups (found by
bench/soak.py: a page more than a minute behind stopped receiving pushes for good)."""

from __future__ import annotations

import time

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer


async def test_a_page_far_behind_stays_in_its_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = get_channel_layer()
    if not isinstance(layer, InMemoryChannelLayer):
        pytest.skip("the Redis layer keeps group members for its group_expiry (a day)")
    channel = await layer.new_channel()
    await layer.group_add("run.1", channel)
    await layer.group_send("run.1", {"type": "run.delta"})  # the page does not read it ...
    later = time.time() + 120
    monkeypatch.setattr(time, "time", lambda: later)  # ... for two minutes
    await layer.group_send("run.1", {"type": "run.delta"})
    assert channel in layer.groups.get("run.1", {})
    assert (await layer.receive(channel))["type"] == "run.delta"
