"""Helpers for the integration tests: read a live server's read API, find series in a catalog."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

from devtools.live_server import LiveServer


def get_json(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=30) as response:
        return json.loads(response.read())


def runs(server: LiveServer, project: str | None = None) -> list[dict[str, Any]]:
    query = "" if project is None else "?project=" + urllib.parse.quote(project)
    return get_json(server, "/api/runs" + query)["runs"]


def run_named(server: LiveServer, name: str) -> dict[str, Any]:
    found = [r for r in runs(server) if r["name"] == name]
    assert len(found) == 1, f"runs named {name!r}: {found}"
    return found[0]


class Catalog:
    """A run's catalog, and its series by (kind, key, stat, env)."""

    def __init__(self, server: LiveServer, run_id: int) -> None:
        self.server, self.run_id = server, run_id
        self.raw = get_json(server, f"/api/runs/{run_id}/catalog")
        self.ids = {(s["kind"], s["key"], s["stat"], s["env"]): s["id"]
                    for s in self.raw["series"] if not s.get("normalized")}

    def step_keys(self) -> set[str]:
        return {key for kind, key, _, _ in self.ids if kind == "step"}

    def sample_metrics(self) -> set[str]:
        return {key for kind, key, _, _ in self.ids if kind == "sample"}

    def has(self, kind: str, key: str, stat: str | None = None, env: str | None = None) -> bool:
        return (kind, key, stat, env) in self.ids

    def values(self, kind: str, key: str, stat: str | None = None,
               env: str | None = None) -> dict[int, Any]:
        """{step: value} of one series, every point (no downsampling at these sizes)."""
        sid = self.ids[(kind, key, stat, env)]
        data = get_json(self.server, f"/api/runs/{self.run_id}/series?max_points=20000&ids="
                        + urllib.parse.quote(sid, safe=""))["series"][sid]
        return dict(zip(data["step"], data["value"], strict=True))
