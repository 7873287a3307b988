"""Who may read and who may change: on loopback anyone (a dashboard on one's own machine);
from anywhere else only a signed-in user (Django auth: `manage.py createsuperuser`).
TELESCOPE_PUBLIC_READ=1 opens *reading* to anyone, never writing: every state-changing method
(PATCH, PUT, POST, DELETE: run edits and deletes, layouts, templates, notes) still needs a
signed-in user off loopback, and the page's CSRF token and origin (Django's CSRF middleware).
Ingest (bearer tokens), the health check, the login page and static files are not affected.

Behind a reverse proxy every request arrives from the proxy: on the same host, from loopback.
TELESCOPE_TRUSTED_PROXIES names the proxies; `client` is the one rule (HTTP and the live
socket) for who a request comes from and whether it is trusted as loopback.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import quote

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

LOOPBACK = ("127.0.0.1", "::1")
OPEN_PREFIXES = ("/api/ingest", "/healthz", "/accounts/", "/static/")
READ_METHODS = ("GET", "HEAD", "OPTIONS")


def is_loopback(address: str | None) -> bool:
    """No address at all is a local caller too (an in-process ASGI client, a unix socket)."""
    return not address or address in LOOPBACK or str(address).startswith("127.")


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Client(NamedTuple):
    """Who a request comes from: `address` is the socket's peer, or the address a trusted
    proxy forwarded; `proxied` when it came through a trusted proxy."""

    address: str | None
    proxied: bool = False

    @property
    def local(self) -> bool:
        """Trusted as loopback. Never through a proxy: whatever address the proxy forwards,
        the visitor may be anywhere the proxy is reachable from."""
        return not self.proxied and is_loopback(self.address)


@functools.lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network,
                                                 ...]:
    return tuple(ipaddress.ip_network(e, strict=False) for e in entries)


def _ip(text: str) -> IPAddress | None:
    """An address as a socket or X-Forwarded-For writes it (`[::1]`, `1.2.3.4:80` too), with an
    IPv4-mapped IPv6 address as its IPv4 one; None when it is none."""
    text = text.strip()
    if text.startswith("[") and "]" in text:
        text = text[1:text.index("]")]
    elif text.count(":") == 1:
        text = text.split(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:  # a dual-stack socket's
        return ip.ipv4_mapped
    return ip


def _trusted(address: str | None) -> bool:
    nets = _networks(tuple(settings.TELESCOPE_TRUSTED_PROXIES))
    ip = _ip(address) if nets and address else None
    return ip is not None and any(ip in net for net in nets)


def client(peer: str | None, forwarded_for: Iterable[str] = ()) -> Client:
    """The one rule for who a request comes from (`peer`: the socket's address;
    `forwarded_for`: the values of its X-Forwarded-For headers).

    A peer that is not one of TELESCOPE_TRUSTED_PROXIES is the client, and its X-Forwarded-For
    is ignored (anyone can send one). From a trusted proxy the client is the rightmost address
    of X-Forwarded-For that is not itself a trusted proxy (each proxy appends whom it heard
    from; what lies left of that is the visitor's own claim), or the proxy itself when there
    is none; and the request is `proxied`, so loopback trust never applies to it."""
    if not _trusted(peer):
        return Client(peer)
    hops = [h.strip() for value in forwarded_for for h in value.split(",") if h.strip()]
    visitor = next((h for h in reversed(hops) if not _trusted(h)), peer)
    return Client(visitor, proxied=True)


def request_client(request: HttpRequest) -> Client:
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    return client(request.META.get("REMOTE_ADDR"), [forwarded] if forwarded else [])


def scope_client(scope: dict[str, Any]) -> Client:
    """The client of an ASGI scope (the live socket)."""
    peer = (scope.get("client") or (None,))[0]
    forwarded = [v.decode("latin-1") for k, v in scope.get("headers") or []
                 if k.lower() == b"x-forwarded-for"]
    return client(peer, forwarded)


def signed_in(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False))


def may_read(who: Client, user: Any) -> bool:
    return settings.TELESCOPE_PUBLIC_READ or may_write(who, user)


def may_write(who: Client, user: Any) -> bool:
    """Changing anything: loopback or a signed-in user, whatever TELESCOPE_PUBLIC_READ says."""
    return who.local or signed_in(user)


class ReadAccessMiddleware:
    """Applies `may_read` to reads and `may_write` to every other method: pages redirect to
    the login page, the API answers 401 JSON."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path, who = request.path, request_client(request)
        reading = request.method in READ_METHODS
        if path.startswith(OPEN_PREFIXES) or (
                may_read(who, request.user) if reading else may_write(who, request.user)):
            return self.get_response(request)
        if path.startswith("/api/"):
            return JsonResponse({"error": "sign in to read (or set TELESCOPE_PUBLIC_READ=1)"
                                 if reading else "sign in to change anything "
                                 "(TELESCOPE_PUBLIC_READ=1 opens reading only)"}, status=401)
        return HttpResponse(status=302, headers={
            "Location": f"{settings.LOGIN_URL}?next={quote(request.get_full_path())}"})
