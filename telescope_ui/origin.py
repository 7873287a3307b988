"""The live socket's origin check: a page may subscribe only from the dashboard's own origin.

Channels' `AllowedHostsOriginValidator` compares the Origin's host with ALLOWED_HOSTS and
ignores its port, so a page served by anything else on the same host (`http://localhost:9999`)
could subscribe. Here the Origin must be the socket's own: its scheme (http for ws, https for
wss), the host and port of its Host header (an absent port is the scheme's default); or one of
CSRF_TRUSTED_ORIGINS (a proxy in front that terminates TLS or changes the host or port: the
same setting Django's CSRF check needs there). The host check of
ALLOWED_HOSTS stays (DNS rebinding).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier
from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_of(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    return parts.scheme, parts.hostname.lower(), port


def same_origin(origin: str, host: str, scheme: str = "http") -> bool:
    """Whether `origin` (an Origin header) is the dashboard's own, reached at `host` (a Host
    header) over `scheme` (http or https), or a trusted one."""
    mine = _origin_of(origin)
    if mine is None:
        return False
    if mine in {_origin_of(o) for o in settings.CSRF_TRUSTED_ORIGINS}:
        return True
    served = _origin_of(f"{scheme}://{host}")
    return served is not None and served == mine


class SameOriginValidator:
    """ASGI middleware for browser sockets: refuses a handshake whose Origin is not the
    dashboard's own (see the module docstring), then applies ALLOWED_HOSTS."""

    def __init__(self, app: Any) -> None:
        self.app = AllowedHostsOriginValidator(app)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or [])
        origin = headers.get(b"origin", b"").decode("latin1")
        host = headers.get(b"host", b"").decode("latin1")
        scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
        if not same_origin(origin, host, scheme):
            return await WebsocketDenier()(scope, receive, send)
        return await self.app(scope, receive, send)
