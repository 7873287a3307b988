"""ASGI entry point: HTTP through Django, `/ws/ingest/` for trainers, `/ws/live/` for pages;
in front of Django, ServeStatic answers `/static/…` from STATIC_ROOT (collected by
`telescope_ui.assets`), so a static request never enters Django."""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "telescope_ui.settings")
django_asgi_app = get_asgi_application()

# Consumers import models: only after the app registry is ready.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import path  # noqa: E402
from servestatic import ServeStaticASGI  # noqa: E402

from ingest.consumers import IngestConsumer  # noqa: E402
from telescope_ui.live import LiveConsumer  # noqa: E402

# Trainers are not browsers: no Origin to check, a bearer token instead.
ingest_routes = URLRouter([path("ws/ingest/", IngestConsumer.as_asgi())])
live_routes = AllowedHostsOriginValidator(
    AuthMiddlewareStack(URLRouter([path("ws/live/", LiveConsumer.as_asgi())]))
)


async def websocket_router(scope, receive, send):  # type: ignore[no-untyped-def]
    app = ingest_routes if scope["path"].startswith("/ws/ingest/") else live_routes
    return await app(scope, receive, send)


def static_files(app: Any) -> ServeStaticASGI:
    """`app` behind ServeStatic: the collected files (scanned once, now), each with its
    precompressed variants, hashed names cached for good (`immutable`); anything else goes on
    to `app` (an unknown /static/ name: Django's 404). No STATIC_ROOT yet (in-process tests that
    only use WebSockets): nothing to serve; `telescope_ui.serve` collects before it imports this."""
    served = ServeStaticASGI(app)
    if settings.STATIC_ROOT and os.path.isdir(settings.STATIC_ROOT):
        served.add_files(settings.STATIC_ROOT, prefix=settings.STATIC_URL)
        served.files.pop(settings.STATIC_URL + "staticfiles.json", None)  # the manifest: ours
    return served


application = ProtocolTypeRouter({"http": static_files(django_asgi_app),
                                  "websocket": websocket_router})
