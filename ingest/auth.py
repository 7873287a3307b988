"""Ingest tokens: shown once, stored as SHA-256, scoped to a project."""

from __future__ import annotations

import hashlib
import secrets

from ingest.models import Project, Token

TOKEN_PREFIX = "tsk_"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(project_name: str) -> tuple[Project, str]:
    """Create the project if needed and a new token for it; returns the plain token."""
    project, _ = Project.objects.get_or_create(name=project_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    Token.objects.create(project=project, digest=digest(token), prefix=token[:12])
    return project, token


def project_for_token(token: str | None) -> int | None:
    """The project id a bearer token grants, or None."""
    if not token or len(token) > 200:
        return None
    row = (Token.objects.filter(digest=digest(token), revoked=False)
           .values_list("project_id", flat=True).first())
    return row


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
