"""Ingest tokens listed and revoked (`manage.py tokens`, `telescope token --list / --revoke`):
a list never shows a token; a revoked one is refused at once, and a connection open with it
is closed with 4401 within seconds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import orjson
import pytest
from channels.db import database_sync_to_async
from django.core.management import CommandError, call_command
from django.test import Client

from devtools.live_server import ROOT
from ingest.models import Project, Token
from ingest.write.auth import REVOCATION_CHECK_SECONDS, create_token, digest
from tests.server.conftest import Trainer, ingest_communicator, settled, step_msg

pytestmark = pytest.mark.django_db(transaction=True)


def tokens(*args: str) -> str:
    out = StringIO()
    call_command("tokens", *args, stdout=out)
    return out.getvalue()


def post_step(token: str) -> int:
    body = orjson.dumps(step_msg(0, {"x": 1.0}))
    return Client().post("/api/ingest", body, content_type="application/json",
                         headers={"Authorization": f"Bearer {token}"}).status_code


def test_the_list_shows_prefix_project_dates_and_state_never_a_token() -> None:
    first = create_token("alpha")[1]
    second = create_token("beta")[1]
    assert post_step(first) == 200  # used: the list says when
    listing = tokens("--list")
    assert first not in listing and second not in listing
    [header, alpha, beta] = listing.splitlines()
    assert header.split() == ["prefix", "project", "created", "last", "used", "state"]
    assert alpha.startswith(first[:12]) and " alpha " in alpha and alpha.endswith("active")
    # created and last used (a prefix may end in "Z" too: count the times, not the letter)
    assert len(re.findall(r"\d\d:\d\dZ", alpha)) == 2
    assert beta.startswith(second[:12]) and " - " in beta  # never used
    assert [line.split() for line in tokens("--list", "--project", "beta").splitlines()[1:]] \
        == [beta.split()]
    with pytest.raises(CommandError, match="no project 'gamma'"):
        tokens("--list", "--project", "gamma")


def test_a_revoked_token_is_refused_at_once_over_http() -> None:
    token = create_token("alpha")[1]
    assert post_step(token) == 200
    out = tokens("--revoke", token[:12])
    assert "revoked" in out and token not in out
    assert post_step(token) == 401
    assert Token.objects.get(digest=digest(token)).revoked
    assert "already revoked" in tokens("--revoke", token[:12])


async def test_a_revoked_token_gets_4401_on_a_new_socket_and_an_open_one_is_closed(
        transactional_db: None) -> None:
    token = (await database_sync_to_async(create_token)("alpha"))[1]
    idle, busy = ingest_communicator(token), ingest_communicator(token)
    assert (await idle.connect())[0] and (await busy.connect())[0]
    assert (await Trainer(busy).send(step_msg(0, {"x": 1.0})))["type"] == "ack"
    await database_sync_to_async(tokens)("--revoke", token[:8])
    revoked = time.monotonic()
    fresh = ingest_communicator(token)
    await fresh.connect()
    assert await fresh.receive_output(5) == {"type": "websocket.close", "code": 4401}
    for comm in (idle, busy):  # one that never sent a frame, one that carried a run
        closed = await comm.receive_output(REVOCATION_CHECK_SECONDS + 3)
        assert closed == {"type": "websocket.close", "code": 4401}
    assert time.monotonic() - revoked < REVOCATION_CHECK_SECONDS + 1
    for comm in (idle, busy, fresh):
        await comm.disconnect()
    await settled()


def test_an_ambiguous_prefix_is_refused_naming_every_token_it_matches() -> None:
    project = Project.objects.create(name="alpha")
    for prefix in ("tsk_abcd1234", "tsk_abcd5678"):
        Token.objects.create(project=project, digest=digest(prefix), prefix=prefix)
    with pytest.raises(CommandError, match="names 2 tokens: tsk_abcd1234 .*tsk_abcd5678"):
        tokens("--revoke", "tsk_abcd")
    assert not Token.objects.filter(revoked=True).exists()
    with pytest.raises(CommandError, match="at least 8 characters"):
        tokens("--revoke", "tsk_")  # would name every token there is
    with pytest.raises(CommandError, match="no token starts with 'tsk_zzzz'"):
        tokens("--revoke", "tsk_zzzz")
    tokens("--revoke", "tsk_abcd5")
    assert list(Token.objects.filter(revoked=True).values_list("prefix", flat=True)) == [
        "tsk_abcd5678"]


def telescope(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
    return subprocess.run([sys.executable, "-m", "telescope_ui.cli", "--data-dir", str(data),
                           *args], env=environ, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_telescope_command_creates_lists_and_revokes(tmp_path: Path) -> None:
    made = telescope(tmp_path, "token", "alpha")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    listed = telescope(tmp_path, "token", "--list")
    assert listed.returncode == 0 and token not in listed.stdout
    assert any(line.startswith(token[:12]) and line.endswith("active")
               for line in listed.stdout.splitlines())
    revoked = telescope(tmp_path, "token", "--revoke", token[:12])
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    after = telescope(tmp_path, "token", "--list", "alpha")
    assert after.stdout.strip().splitlines()[-1].endswith("revoked")
    unknown = telescope(tmp_path, "token", "--revoke", "tsk_nothing")
    assert unknown.returncode == 1 and "no token starts with" in unknown.stderr
