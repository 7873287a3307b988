"""ASGI entry point: HTTP through Django, `/ws/ingest/` for trainers, `/ws/live/` for pages;
in front of Django, ServeStatic answers `/static/…` from STATIC_ROOT (collected by
`telescope_ui.assets`), so a static request never enters Django."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "telescope_ui.settings")
django_asgi_app = get_asgi_application()

# Consumers import models: only after the app registry is ready.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from ingest.write.consumers import IngestConsumer  # noqa: E402
from telescope_ui.assets import static_app  # noqa: E402
from telescope_ui.live import LiveConsumer  # noqa: E402
from telescope_ui.origin import SameOriginValidator  # noqa: E402

# Trainers are not browsers: no Origin to check, a bearer token instead.
ingest_routes = URLRouter([path("ws/ingest/", IngestConsumer.as_asgi())])
live_routes = SameOriginValidator(
    AuthMiddlewareStack(URLRouter([path("ws/live/", LiveConsumer.as_asgi())]))
)


async def websocket_router(scope, receive, send):
    app = ingest_routes if scope["path"].startswith("/ws/ingest/") else live_routes
    return await app(scope, receive, send)


application = ProtocolTypeRouter({"http": static_app(django_asgi_app),
                                  "websocket": websocket_router})

# Everything loaded so far (Django, the apps, numpy, ...) lives as long as the process: move it
# out of the cyclic collector's reach. Otherwise every full collection walks it all again while
# ingest and aggregation allocate their short-lived lists (measured: the pipeline's point
# writes took 2-4x longer in collections than in their own work).
gc.freeze()
