"""The one decode → validate → store path shared by the WebSocket consumer and HTTP endpoint."""

from __future__ import annotations

from typing import Any

from ingest.store import Outcome, apply_message
from trainer_hooks import protocol as p


def handle_object(project_id: int, obj: Any) -> Outcome:
    """Validate and store one decoded message; a bad one gets an error reply and writes
    nothing."""
    try:
        msg = p.validate_message(obj)
    except p.ProtocolError as exc:
        return Outcome(exc.as_reply(p.message_id(obj)))
    return apply_message(project_id, msg)


def handle_frame(project_id: int, data: bytes | str, *, binary: bool) -> Outcome:
    try:
        obj = p.decode_frame(data, binary=binary)
    except p.ProtocolError as exc:
        return Outcome(exc.as_reply())
    return handle_object(project_id, obj)
