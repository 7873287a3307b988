"""Ingest tokens: shown once, stored as SHA-256, scoped to a project; listed by their prefix
(the first characters, which identify a token without granting anything) and revoked by it.

A revoked token is refused at once by a new connection or HTTP request (every one looks the
token up); a connection already open with it is closed (4401) within REVOCATION_CHECK_SECONDS
(`watch_revocation`), also when another process (`telescope token --revoke`) revoked it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils import timezone

from ingest.models import Project, Token

TOKEN_PREFIX = "tsk_"
PREFIX_LENGTH = 12  # stored and shown: TOKEN_PREFIX and 8 random characters
MIN_PREFIX = len(TOKEN_PREFIX) + 4  # to revoke by: fewer would too easily name another token
REVOCATION_CHECK_SECONDS = 2.0
# How stale `last_used_at` may get: it is written at most this often per token, so a busy
# token costs no write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)

log = logging.getLogger(__name__)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(project_name: str) -> tuple[Project, str]:
    """Create the project if needed and a new token for it; returns the plain token."""
    project, _ = Project.objects.get_or_create(name=project_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    Token.objects.create(project=project, digest=digest(token), prefix=token[:PREFIX_LENGTH])
    return project, token


def project_for_token(token: str | None) -> int | None:
    """The project id a bearer token grants, or None; notes when it was used."""
    if not token or len(token) > 200:
        return None
    row = (Token.objects.filter(digest=digest(token), revoked=False)
           .values_list("pk", "project_id", "last_used_at").first())
    if row is None:
        return None
    pk, project_id, last_used = row
    now = timezone.now()
    if last_used is None or now - last_used >= LAST_USED_RESOLUTION:
        try:
            Token.objects.filter(pk=pk).update(last_used_at=now)
        except DatabaseError as exc:  # a note only: never refuse a good token for it
            log.warning("could not note the use of token %s: %s", pk, exc)
    return project_id


def matching(prefix: str) -> list[Token]:
    """The tokens `prefix` names: the whole token, or the start of its shown prefix."""
    prefix = prefix.strip()
    whole = list(Token.objects.filter(digest=digest(prefix)).select_related("project"))
    if whole or len(prefix) > PREFIX_LENGTH:
        return whole
    return list(Token.objects.filter(prefix__startswith=prefix).select_related("project")
                .order_by("created_at"))


def revoke(prefix: str) -> Token:
    """Revoke the one token `prefix` names, and return it as it was (`revoked` if it already
    was); ValueError, saying why, when it names none or several (then it lists them)."""
    if len(prefix.strip()) < MIN_PREFIX:
        raise ValueError(f"give at least {MIN_PREFIX} characters of the token "
                         f"({TOKEN_PREFIX} and 4 more), as `telescope token --list` shows them")
    found = matching(prefix)
    if not found:
        raise ValueError(f"no token starts with {prefix!r}")
    if len(found) > 1:
        names = "; ".join(f"{t.prefix} (project {t.project.name!r}"
                          f"{', revoked' if t.revoked else ''})" for t in found)
        raise ValueError(f"{prefix!r} names {len(found)} tokens: {names}; give more of it")
    [token] = found
    if not token.revoked:
        Token.objects.filter(pk=token.pk).update(revoked=True)
    return token


_checked: dict[str, tuple[float, bool]] = {}  # digest -> (when, revoked), this process


def known_revoked(key: str) -> bool | None:
    """What this process learned of the token with digest `key` in the last half
    REVOCATION_CHECK_SECONDS (None: nothing that recent)."""
    seen = _checked.get(key)
    fresh = seen is not None and time.monotonic() - seen[0] < REVOCATION_CHECK_SECONDS / 2
    return seen[1] if seen is not None and fresh else None


def token_revoked(key: str) -> bool:
    """Whether the token with digest `key` is revoked (or gone): asked of the database at most
    twice per REVOCATION_CHECK_SECONDS, however many connections the token has."""
    known = known_revoked(key)
    if known is not None:
        return known
    gone = not Token.objects.filter(digest=key, revoked=False).exists()
    _checked[key] = (time.monotonic(), gone)
    return gone


async def watch_revocation(key: str, close: Callable[[], Awaitable[None]]) -> None:
    """Run while a connection with the token of digest `key` is open: `close` it once the
    token is revoked (within about REVOCATION_CHECK_SECONDS)."""
    while True:
        await asyncio.sleep(REVOCATION_CHECK_SECONDS / 2)
        try:
            gone = known_revoked(key)  # most connections of a busy token stop here
            if gone is None:
                gone = await database_sync_to_async(token_revoked)(key)
            if gone:
                await close()
                return
        except DatabaseError as exc:  # the database is out: the next check tries again
            log.warning("could not check a token's revocation: %s", exc)


def bearer(header: str | bytes | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None
