"""The Content-Security-Policy of every response: scripts only from the dashboard's own files
(no inline script, no eval), connections only to its own origin (the live WebSocket included),
no plugins, no framing, forms only to itself. Styles may be inline: Plotly sets them on the
elements it draws. The pages keep to it: their scripts are modules under /static/ and their data
are JSON blocks (`json_script`), which are never executed."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
