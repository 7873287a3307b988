"""Fuzz the ingest path of a real server process (its WebSocket consumer and HTTP view) with
random bytes, arbitrary JSON / msgpack trees and every message type with mutated fields: never
a 1011 close or a 500, every error reply names its field, and nothing of a refused message is
written (the stored message ids are exactly the acknowledged ones)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from devtools.live_server import LiveServer, ServerState

EXAMPLES = 400
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e300, -1e300, 5e-324]),
    st.text(max_size=40), st.sampled_from(["\x00", "a\nb", "é" * 300, "/", "a//b", "x" * 201]),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 2**64, -(2**70)]),
    st.binary(max_size=8),
    # typed arrays (trainer_hooks.wire.arrays) well and badly formed, and unknown extensions
    st.builds(msgpack.ExtType, st.sampled_from([1, 2, 3, 99]), st.binary(max_size=24)))
TREES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)),
    max_leaves=30)
VALID = [
    {"type": "run.start", "config": {"lr": 0.1}, "environments": [
        {"name": "e", "reward_min": 0, "reward_max": 1, "metrics_ranges": {"m": {"min": 0}}}],
     "time": 1.7e9, "resume": False},
    {"type": "step", "step": 1, "metrics": {"loss": 0.5, "optim/update_outcome": "applied"}},
    {"type": "samples", "step": 1, "sample_id": [1, 2], "group_id": [0, 0],
     "reward": [0.0, 1.0], "env": "e", "metrics": {"m": [1, None]}, "advantage": [0.1, -0.1],
     "stop_reason": ["length", None], "discard_reason": [None, "max_async"]},
    {"type": "ranges", "environments": [{"name": "e", "reward_min": 0, "reward_max": 2}]},
    {"type": "run.end", "status": "finished"},
    {"type": "barrier"},
]


def _mutate(draw: Any, node: Any) -> None:
    """Replace, add or delete one field somewhere inside `node` (a dict or list)."""
    while True:
        children = [k for k, v in (node.items() if isinstance(node, dict) else enumerate(node))
                    if isinstance(v, (dict, list)) and v]
        if not children or draw(st.booleans()):
            break
        node = node[draw(st.sampled_from(children))]
    value = draw(st.one_of(TREES, st.dictionaries(st.text(max_size=6), TREES, min_size=1,
                                                  max_size=3)))
    if isinstance(node, dict):
        key = draw(st.sampled_from(sorted(node) + ["incarnation", "extra"]))
        if draw(st.booleans()):
            node[key] = value
        else:
            node.pop(key, None)
    elif node:
        node[draw(st.integers(0, len(node) - 1))] = value


@st.composite
def mutated(draw: Any) -> dict[str, Any]:
    msg = json.loads(json.dumps(draw(st.sampled_from(VALID))))  # a fresh copy to mutate
    msg = {"v": 1, "id": draw(st.text(min_size=1, max_size=12)), "run": "fuzz", **msg}
    for _ in range(draw(st.integers(0, 3))):
        _mutate(draw, msg)
    return msg


@st.composite
def hostile_objects(draw: Any) -> dict[str, Any]:
    """A valid message whose object fields (config, metrics, ...) hold hostile leaves."""
    msg = {"v": 1, "id": draw(st.text(min_size=1, max_size=12)), "run": "fuzz",
           **draw(st.sampled_from(VALID))}
    for key, value in list(msg.items()):
        if isinstance(value, dict):
            msg[key] = draw(st.dictionaries(st.text(max_size=6), TREES, min_size=1, max_size=4))
    return msg


FRAMES = st.one_of(
    hostile_objects().map(lambda m: ("msgpack", m)),
    st.binary(max_size=200).map(lambda b: ("bytes", b)),
    TREES.map(lambda t: ("json", t)),
    mutated().map(lambda m: ("json", m)),
    mutated().map(lambda m: ("msgpack", m)),
    st.lists(mutated(), max_size=4).map(lambda ms: ("msgpack", ms)),
)


def encode(kind: str, obj: Any) -> bytes | str | None:
    if kind == "bytes":
        return obj  # type: ignore[no-any-return]
    try:
        if kind == "json":
            return json.dumps(obj, allow_nan=True)
        return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]
    except (OverflowError, TypeError, ValueError):
        return None


def check_replies(body: Any, acked: set[str]) -> None:
    for reply in body if isinstance(body, list) else [body]:
        assert reply["type"] in ("ack", "error"), reply
        if reply["type"] == "error":
            assert "field" in reply and reply["code"] and reply["message"], reply
        elif not reply.get("duplicate"):
            acked.add(reply["id"])


def stored_ids(state: ServerState) -> set[str]:
    script = ("import json\nfrom ingest.models import IngestedMessage\n"
              "print(json.dumps(list(IngestedMessage.objects.values_list('msg_id', "
              "flat=True))))\n")
    return set(json.loads(state.manage("shell", "-c", script).strip().splitlines()[-1]))


def test_fuzzed_frames_never_crash_the_server(live_state: ServerState,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    live_state.env.update(TELESCOPE_MAX_MESSAGES_PER_SECOND="100000",
                          TELESCOPE_RATE_BURST="100000")
    server = LiveServer(live_state).start()
    token = live_state.token("proj")
    headers = {"Authorization": f"Bearer {token}"}
    acked: set[str] = set()
    barriers: set[str] = set()
    cases = {"ws": 0, "http": 0}
    # no keepalive pings: their payloads come from `random`, which hypothesis watches
    ws = ws_connect(server.ws + "/ws/ingest/", additional_headers=headers, ping_interval=None)

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(FRAMES, st.booleans())
    def one(frame: tuple[str, Any], over_http: bool) -> None:
        nonlocal ws
        data = encode(*frame)
        if data is None:
            return
        for m in frame[1] if isinstance(frame[1], list) else [frame[1]]:
            if isinstance(m, dict) and m.get("type") == "barrier":
                barriers.add(str(m.get("id")))
        if over_http:
            cases["http"] += 1
            raw = data.encode() if isinstance(data, str) else data
            kind = "application/json" if isinstance(data, str) else "application/msgpack"
            req = urllib.request.Request(server.http + "/api/ingest", data=raw,
                                         headers={**headers, "Content-Type": kind})
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    body = json.load(resp)
            except urllib.error.HTTPError as exc:
                assert exc.code == 400, (exc.code, frame)
                assert "error" in json.load(exc)
                return
            for reply in body["acks"] + body["errors"]:
                check_replies(reply, acked)
            return
        cases["ws"] += 1
        try:
            ws.send(data)
            check_replies(json.loads(ws.recv(30)), acked)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            pytest.fail(f"connection closed ({code}) after {frame!r:.300}")

    try:
        one()
    finally:
        ws.close()
        server.stop()
    with capsys.disabled():  # in the test run's output (CI's log), passing or not
        print(f"\nfuzz: {cases['ws']} WebSocket frames and {cases['http']} HTTP bodies")
    stored = stored_ids(live_state)
    assert stored <= acked and acked - stored <= barriers  # a barrier stores nothing
