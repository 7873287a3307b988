"""`RunTarget`: where a client's messages go — the server, the token, the run name and how the
run is opened — and what the server answered to its `run.start`.

Made by the `Client` on the caller's thread; read by the sender thread's parts, which set
`run_id` and `run_name` from the server's answer (`opened`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger("trainer_hooks.sender")


def ingest_url(url: str) -> str:
    """`ws://host:port` (or http) → `ws://host:port/ws/ingest/`; a given path is kept."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss") or not parts.netloc:
        raise ValueError(f"not a ws:// or http:// URL: {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/ws/ingest/"
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


@dataclass
class RunTarget:
    """One client's destination. `scope` names the server and the token's project for the
    outbox (`outbox.scope_of`); `resume` continues the newest run of this name; `join` sends
    into it without starting it."""

    url: str
    token: str = field(repr=False)
    run: str
    scope: str
    resume: bool = False
    join: bool = False
    run_id: int | None = None  # known once the server acknowledged our run.start
    run_name: str | None = None

    def opened(self, reply: dict[str, Any]) -> None:
        """The server's answer to our run.start: which run this client's messages reach."""
        self.run_id, self.run_name = reply.get("run_id"), reply.get("run_name")
        if reply.get("new_run"):
            log.warning("telescope: run %r already holds an earlier experiment on %s; this one "
                        "is stored as the new run %r (id %s). To continue the earlier run "
                        "instead, connect with resume=True.", self.run, self.url, self.run_name,
                        self.run_id)
        elif reply.get("duplicate") is None and self.run_name not in (None, self.run):
            log.info("telescope: run %r is shown as %r (id %s)", self.run, self.run_name,
                     self.run_id)
