"""A run deleted through one server process, watched through another (PostgreSQL + Redis): the
page on the other process is told at once, and the other process's old URLs say the run was
deleted (the tombstone is in the shared database)."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
import websockets

from devtools.live_server import LiveServer
from tests.service.test_two_processes import get, send_all, servers  # noqa: F401 - fixture

pytestmark = pytest.mark.service


def delete_run(server: LiveServer, run_id: int) -> Any:
    """A page-style DELETE: the CSRF cookie from a page, echoed in X-CSRFToken."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(server.http + "/", timeout=10).read()
    token = next(c.value for c in jar if c.name == "csrftoken")
    req = urllib.request.Request(server.http + f"/api/runs/{run_id}", method="DELETE",
                                 headers={"X-CSRFToken": token})
    with opener.open(req, timeout=10) as res:
        return json.loads(res.read())


async def test_a_page_on_one_process_hears_of_a_delete_through_the_other(servers) -> None:  # noqa: F811  # type: ignore[no-untyped-def]
    a, b, token = servers
    await send_all(a, token, [{"v": 1, "id": "s0", "type": "step", "run": "doomed", "step": 0,
                               "metrics": {"loss": 1.0}}])
    run_id = get(b, "/api/runs")["runs"][0]["id"]
    async with websockets.connect(b.ws + "/ws/live/", origin=b.http) as page:
        await page.send(json.dumps({"type": "subscribe", "run": run_id, "after_seq": 0}))
        while json.loads(await asyncio.wait_for(page.recv(), 10))["type"] != "progress":
            pass  # subscribed: replay, then the backlog
        assert await asyncio.to_thread(delete_run, a, run_id) == {"deleted": run_id}
        start = time.monotonic()
        while (msg := json.loads(await asyncio.wait_for(page.recv(), 10)))["type"] != "run":
            pass
        assert time.monotonic() - start < 3
    assert msg["info"]["deleted"] is True and msg["info"]["name"] == "doomed"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(b.http + f"/runs/{run_id}/metrics", timeout=10)
    assert err.value.code == 404
    assert "This run was deleted" in err.value.read().decode()
