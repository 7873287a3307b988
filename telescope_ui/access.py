"""Who may read and who may change: on loopback anyone (a dashboard on one's own machine);
from anywhere else only a signed-in user (Django auth: `manage.py createsuperuser`).
TELESCOPE_PUBLIC_READ=1 opens *reading* to anyone, never writing: every state-changing method
(PATCH, PUT, POST, DELETE: run edits and deletes, layouts, templates, notes) still needs a
signed-in user off loopback, and the page's CSRF token and origin (Django's CSRF middleware).
Ingest (bearer tokens), the health check, the login page and static files are not affected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

LOOPBACK = ("127.0.0.1", "::1")
OPEN_PREFIXES = ("/api/ingest", "/healthz", "/accounts/", "/static/")
READ_METHODS = ("GET", "HEAD", "OPTIONS")


def is_loopback(address: str | None) -> bool:
    """No address at all is a local caller too (an in-process ASGI client, a unix socket)."""
    return not address or address in LOOPBACK or str(address).startswith("127.")


def signed_in(user: Any) -> bool:
    return bool(getattr(user, "is_authenticated", False))


def may_read(address: str | None, user: Any) -> bool:
    return settings.TELESCOPE_PUBLIC_READ or may_write(address, user)


def may_write(address: str | None, user: Any) -> bool:
    """Changing anything: loopback or a signed-in user, whatever TELESCOPE_PUBLIC_READ says."""
    return is_loopback(address) or signed_in(user)


class ReadAccessMiddleware:
    """Applies `may_read` to reads and `may_write` to every other method: pages redirect to
    the login page, the API answers 401 JSON."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path, address = request.path, request.META.get("REMOTE_ADDR")
        reading = request.method in READ_METHODS
        if path.startswith(OPEN_PREFIXES) or (
                may_read(address, request.user) if reading else may_write(address, request.user)):
            return self.get_response(request)
        if path.startswith("/api/"):
            return JsonResponse({"error": "sign in to read (or set TELESCOPE_PUBLIC_READ=1)"
                                 if reading else "sign in to change anything "
                                 "(TELESCOPE_PUBLIC_READ=1 opens reading only)"}, status=401)
        return HttpResponse(status=302, headers={
            "Location": f"{settings.LOGIN_URL}?next={quote(request.get_full_path())}"})
