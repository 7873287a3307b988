"""The documented frame limit holds at every layer of a real server process: a 20 MiB frame
(above TELESCOPE_MAX_MESSAGE_BYTES, below daphne's cap) is closed with 4413, not dropped."""

from __future__ import annotations

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from tests.support.live_server import LiveServer, ServerState


def test_a_20_mib_frame_gets_close_4413(dashboard_server: LiveServer,
                                        live_state: ServerState) -> None:
    token = live_state.token("proj")
    with ws_connect(dashboard_server.ws + "/ws/ingest/", max_size=None,
                    additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        ws.send(b"\x00" * (20 << 20))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(60)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4413
