"""HTTP ingest: `POST /api/ingest` with one message or a list (JSON or msgpack)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ingest.core import broadcast
from ingest.pipeline.kick import notify, wait_aggregated
from ingest.write import auth, health
from ingest.write.admission import ingest_executor, token_state
from ingest.write.frames import handle_objects
from trainer_hooks.wire import protocol as p

log = logging.getLogger(__name__)


@csrf_exempt  # bearer-token API, no cookies involved
@require_POST
def ingest(request: HttpRequest) -> JsonResponse:
    token = auth.bearer(request.headers.get("Authorization"))
    project_id = auth.project_for_token(token)
    if project_id is None or token is None:
        return JsonResponse({"error": "missing or bad token"}, status=401)
    key = auth.digest(token)
    if not token_state(key).bucket.take():  # the token's budget, shared with its sockets
        return JsonResponse({"error": "rate limited: this token sends more than "
                             f"{settings.TELESCOPE_TOKEN_MESSAGES_PER_SECOND} requests and "
                             "frames per second", "retry": True}, status=429,
                            headers={"Retry-After": "1"})
    limit = settings.TELESCOPE_MAX_MESSAGE_BYTES
    too_large = JsonResponse({"error": f"body too large: the limit is {limit} bytes"},
                             status=413)
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        return JsonResponse({"error": "bad Content-Length"}, status=400)
    if length > limit:
        return too_large
    try:
        body = request.body
    except RequestDataTooBig:
        return too_large
    if len(body) > limit:
        return too_large
    binary = (request.content_type or "").lower() == "application/msgpack"
    try:
        payload = p.decode_frame(body, binary=binary)
    except p.ProtocolError as exc:
        return JsonResponse({"error": exc.message}, status=400)
    messages: list[Any] = payload if isinstance(payload, list) else [payload]
    try:
        # on the ingest writer, in the token's turn (ingest.write.admission): a flood of requests
        # waits behind its own token's work, not in front of every other token's
        outcomes = ingest_executor().submit_to(key, handle_objects, project_id,
                                               messages).result()
    except Exception as exc:  # noqa: BLE001 - the storage failed: nothing stored, retryable
        log.exception("HTTP ingest failed; answered 503 (retry)")
        health.ingest_failed(exc)
        return JsonResponse({"error": "the server could not store the messages; nothing was "
                             "stored, send them again", "code": "storage", "retry": True},
                            status=503)
    health.ingest_succeeded()
    for outcome in outcomes:
        async_to_sync(broadcast.publish)(outcome)
        if outcome.run_id is not None and (outcome.dirty or outcome.seq is not None):
            notify(outcome.run_id)  # the pipeline aggregates; this does not wait
    for outcome in outcomes:  # ... unless asked to: a `barrier` answers once readable
        if outcome.barrier:
            async_to_sync(wait_aggregated)(outcome)
    acks = [o.reply for o in outcomes if o.reply["type"] == "ack"]
    errors = [o.reply for o in outcomes if o.reply["type"] != "ack"]
    return JsonResponse({"acks": acks, "errors": errors})
