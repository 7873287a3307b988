"""Who may read: on loopback anyone (a dashboard on one's own machine); from anywhere else
only a signed-in user (Django auth: `manage.py createsuperuser`), unless
TELESCOPE_PUBLIC_READ=1. Ingest (bearer tokens), the health check, the login page and static
files are not affected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

LOOPBACK = ("127.0.0.1", "::1")
OPEN_PREFIXES = ("/api/ingest", "/healthz", "/accounts/", "/static/")


def is_loopback(address: str | None) -> bool:
    """No address at all is a local caller too (an in-process ASGI client, a unix socket)."""
    return not address or address in LOOPBACK or str(address).startswith("127.")


def may_read(address: str | None, user: Any) -> bool:
    return (settings.TELESCOPE_PUBLIC_READ or is_loopback(address)
            or bool(getattr(user, "is_authenticated", False)))


class ReadAccessMiddleware:
    """Pages redirect to the login page, the read API answers 401 JSON."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path
        if path.startswith(OPEN_PREFIXES) or may_read(request.META.get("REMOTE_ADDR"),
                                                      request.user):
            return self.get_response(request)
        if path.startswith("/api/"):
            return JsonResponse({"error": "sign in to read (or set TELESCOPE_PUBLIC_READ=1)"},
                                status=401)
        return HttpResponse(status=302, headers={
            "Location": f"{settings.LOGIN_URL}?next={quote(request.get_full_path())}"})
