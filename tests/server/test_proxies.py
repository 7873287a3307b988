"""Behind a reverse proxy (TELESCOPE_TRUSTED_PROXIES): a visitor is judged by the address the
proxy forwards, and nothing that came through the proxy is trusted as loopback — so a proxy on
the same host no longer opens the dashboard to everyone it serves."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from ingest.models import Project, Run
from telescope_ui import access
from telescope_ui.asgi import application
from telescope_ui.settings import envnetworks

pytestmark = pytest.mark.django_db(transaction=True)
VISITOR = "203.0.113.9"


def through_proxy(forwarded: str | None = VISITOR, proxy: str = "127.0.0.1") -> Client:
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    return Client(REMOTE_ADDR=proxy, **extra)


def must_sign_in(client: Client) -> None:
    page = client.get("/")
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")
    assert client.get("/api/runs").status_code == 401
    project = Project.objects.get_or_create(name="p")[0]
    run = Run.objects.create(project=project, name="r", wire_name="r",
                             started_at="2026-01-01T00:00Z", updated_at="2026-01-01T00:00Z")
    write = client.patch(f"/api/runs/{run.pk}", {"notes": "x"}, content_type="application/json")
    assert write.status_code == 401
    assert Run.objects.get(pk=run.pk).notes == ""


def test_without_the_setting_a_same_host_proxy_opens_everything_until_it_is_trusted(
        settings: Any) -> None:
    # As documented (operations.md "Access"): the proxy's requests come from loopback.
    assert through_proxy().get("/api/runs").status_code == 200
    settings.TELESCOPE_TRUSTED_PROXIES = ["127.0.0.1", "::1"]
    must_sign_in(through_proxy())


@pytest.mark.parametrize("forwarded", ["127.0.0.1", "::1", None, "", "not-an-address"])
def test_through_a_trusted_proxy_loopback_is_never_trusted(settings: Any,
                                                            forwarded: str | None) -> None:
    # Forwarding a loopback address (someone on the proxy's host, or a visitor's own claim
    # the proxy passed on), or nothing at all: the visitor may still be anywhere.
    settings.TELESCOPE_TRUSTED_PROXIES = ["127.0.0.1", "::1"]
    must_sign_in(through_proxy(forwarded))


def test_through_a_trusted_proxy_a_signed_in_user_reads_and_writes(settings: Any) -> None:
    settings.TELESCOPE_TRUSTED_PROXIES = ["127.0.0.1"]
    User.objects.create_user("ada", password="lovelace-1843")
    visitor = through_proxy()
    assert visitor.login(username="ada", password="lovelace-1843")
    assert visitor.get("/api/runs").status_code == 200 and visitor.get("/").status_code == 200
    settings.TELESCOPE_PUBLIC_READ = True
    anonymous = through_proxy()
    assert anonymous.get("/api/runs").status_code == 200
    assert anonymous.delete("/api/runs/1").status_code == 401  # reading only


def test_an_untrusted_peers_forwarded_for_is_ignored(settings: Any) -> None:
    settings.TELESCOPE_TRUSTED_PROXIES = ["10.0.0.5"]
    # A local caller that is not the proxy: it is the client, and loopback is trusted.
    assert access.client("127.0.0.1", [VISITOR]) == access.Client("127.0.0.1")
    assert through_proxy(VISITOR, proxy="127.0.0.1").get("/api/runs").status_code == 200
    # Nor does claiming loopback help a remote caller.
    assert access.client("192.0.2.7", ["127.0.0.1"]) == access.Client("192.0.2.7")
    must_sign_in(through_proxy("127.0.0.1", proxy="192.0.2.7"))


def test_the_client_is_the_rightmost_address_that_is_not_a_trusted_proxy(settings: Any) -> None:
    settings.TELESCOPE_TRUSTED_PROXIES = ["127.0.0.1", "10.0.0.0/8"]
    # Each proxy appends whom it heard from: 10.0.0.2 is a second proxy, 198.51.100.1 the
    # visitor's own claim.
    assert access.client("127.0.0.1", ["198.51.100.1, 203.0.113.9, 10.0.0.2"]) == \
        access.Client("203.0.113.9", proxied=True)
    assert access.client("127.0.0.1", ["198.51.100.1", "203.0.113.9"]) == \
        access.Client("203.0.113.9", proxied=True)  # two headers: in order
    assert access.client("::ffff:127.0.0.1", [VISITOR]).proxied  # a dual-stack socket
    assert access.client("127.0.0.1", ["10.0.0.2"]) == access.Client("127.0.0.1", proxied=True)
    assert access.client("127.0.0.2", [VISITOR]).local  # loopback, not a proxy
    assert not access.client("127.0.0.1", [VISITOR]).local
    settings.TELESCOPE_TRUSTED_PROXIES = []
    assert access.client("127.0.0.1", [VISITOR]) == access.Client("127.0.0.1")


def live_socket(peer: str, forwarded: bytes | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]
    if forwarded is not None:
        headers.append((b"x-forwarded-for", forwarded))
    comm = WebsocketCommunicator(application, "/ws/live/", headers=headers)
    comm.scope["client"] = [peer, 5000]
    return comm


async def test_live_updates_through_a_trusted_proxy_need_a_signed_in_user(
        transactional_db: None, settings: Any) -> None:
    comm = live_socket("127.0.0.1", VISITOR.encode())
    assert (await comm.connect())[0]
    assert await comm.receive_nothing(0.3)  # without the setting: loopback, as before
    await comm.disconnect()
    settings.TELESCOPE_TRUSTED_PROXIES = ["127.0.0.1"]
    comm = live_socket("127.0.0.1", VISITOR.encode())
    assert (await comm.connect())[0]
    assert await comm.receive_output(5) == {"type": "websocket.close", "code": 4403}
    await comm.disconnect()
    direct = live_socket("127.0.0.2", VISITOR.encode())  # loopback, not the proxy: trusted
    assert (await direct.connect())[0] and await direct.receive_nothing(0.3)
    await direct.disconnect()


def test_a_bad_proxy_address_stops_the_start_naming_the_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELESCOPE_TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8, proxy.local")
    with pytest.raises(ImproperlyConfigured, match="TELESCOPE_TRUSTED_PROXIES: .*proxy.local"):
        envnetworks("TELESCOPE_TRUSTED_PROXIES")
    monkeypatch.setenv("TELESCOPE_TRUSTED_PROXIES", "127.0.0.1, ::1, 10.0.0.0/8")
    assert envnetworks("TELESCOPE_TRUSTED_PROXIES") == ["127.0.0.1", "::1", "10.0.0.0/8"]
