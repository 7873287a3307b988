"""Browser tests: the system Chromium (never a downloaded one) driven by Playwright against a
real server subprocess with real ingest (WebSocket and HTTP)."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from devtools.live_server import ROOT, LiveServer

# Playwright's sync API keeps an event loop running in this thread; any in-process Django
# database access (fixtures of other suites) must not be refused because of it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "artifacts"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that drives Chromium (through the `browser` fixture, whatever asks for it) is
    marked `browser`, so `-m "not browser"` (CI's second pass) leaves out all of them, not only
    those whose module remembered the mark."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One Chromium for the browser tests. Package scope: Playwright's sync API runs an event
    loop in this thread while it is open, which would break asyncio tests that come after."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed (CI=true: browser tests must run)")
        pytest.skip("chromium is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Dashboard:
    """A live server plus the means to feed it (HTTP or WebSocket ingest) and read it."""

    def __init__(self, server: LiveServer, token: str) -> None:
        self.server = server
        self.token = token
        self.url = server.http

    def post(self, messages: list[dict[str, Any]] | dict[str, Any]) -> dict[str, Any]:
        """POST messages over HTTP, with a `barrier` per run after them: the reply comes once
        the runs' aggregates are readable."""
        messages = messages if isinstance(messages, list) else [messages]
        runs = dict.fromkeys(m["run"] for m in messages if isinstance(m, dict) and "run" in m)
        messages = [*messages, *({"v": 1, "id": f"barrier-{uuid.uuid4().hex}", "type": "barrier",
                                  "run": run} for run in runs)]
        req = urllib.request.Request(
            self.url + "/api/ingest", data=json.dumps(messages).encode(), method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as res:
            body = json.loads(res.read())
        assert not body["errors"], body["errors"]
        return body

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as res:
            return json.loads(res.read())

    def run_id(self, name: str) -> int:
        return next(r["id"] for r in self.get("/api/runs")["runs"] if r["name"] == name)

    def ingest_socket(self) -> Trainer:
        ws = connect(self.server.ws + "/ws/ingest/",
                     additional_headers={"Authorization": f"Bearer {self.token}"})
        return Trainer(ws)


class Trainer:
    """The WebSocket ingest path: send a message, wait for its ack."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    def send(self, msg: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=timeout))
            if reply.get("id") == msg["id"]:
                assert reply["type"] == "ack", reply
                return reply

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def dashboard(dashboard_server: LiveServer) -> Iterator[Dashboard]:
    yield Dashboard(dashboard_server, dashboard_server.state.token("browser"))


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh context (empty localStorage) whose page fails the test on a JS error. It
    bypasses the Content-Security-Policy, which refuses the string expressions tests evaluate
    in the page (eval); tests/browser/test_csp.py holds the pages to the policy."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.js_errors = errors
    yield pg
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def step(run: str, n: int, metrics: dict[str, float | None], time: float | None = None
         ) -> dict[str, Any]:
    msg: dict[str, Any] = {"v": 1, "id": f"{run}-step-{n}", "type": "step", "run": run,
                           "step": n, "metrics": metrics}
    if time is not None:
        msg["time"] = time
    return msg


def chart_data(pg: Any, sid: str) -> Any:
    """The Plotly data and layout of the chart plotting `sid` (None while not rendered)."""
    return pg.evaluate(
        """sid => { const gd = document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`);
        if (!gd || !gd.data) return null;
        return {data: gd.data.map(t => ({x: Array.from(t.x || []), y: Array.from(t.y || []),
                  name: t.name, meta: t.meta, color: t.line && t.line.color,
                  fill: t.fill || null, opacity: t.opacity ?? 1})),
                layout: {yaxis: {range: gd.layout.yaxis.range, autorange: gd.layout.yaxis.autorange,
                                 type: gd.layout.yaxis.type},
                         shapes: (gd.layout.shapes || []).map(s => s.y0)}}; }""", sid)


def wait_chart(pg: Any, sid: str, predicate: str = "true", timeout: float = 10_000) -> Any:
    """Wait until the chart of `sid` is drawn and `predicate` (JS over `gd`) holds."""
    pg.wait_for_function(
        f"""sid => {{ const gd = document.querySelector(`[data-series-id="${{CSS.escape(sid)}}"]`);
        return !!(gd && gd.data && gd.data.length && ({predicate})); }}""",
        arg=sid, timeout=timeout)
    return chart_data(pg, sid)


def trace(fig: Any, run_id: int, role: str) -> Any:
    return next(t for t in fig["data"] if t["meta"] and t["meta"]["run"] == run_id
                and t["meta"]["role"] == role)


@pytest.fixture
def strict_page(browser: Any) -> Iterator[tuple[Any, list[str]]]:
    """A page held to the Content-Security-Policy (no bypass_csp, unlike `page`): (page,
    violations and JS errors)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda exc: problems.append(str(exc)))
    pg.on("console", lambda m: problems.append(m.text)
          if "Content Security Policy" in m.text else None)
    yield pg, problems
    context.close()
