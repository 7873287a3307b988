"""Sample text and the sample viewer: one server process on the embedded default
(SQLite + in-memory layer), steps of 512 samples with 2 KB of text each (a 512-byte prompt and
a 1.5 KB completion of English-like words, so compression sees text, not noise).

Measures, with their targets:
- ingest throughput over one WebSocket, a step per message, with text against the same
  messages without it (within 2x), interleaved rounds, one message at a time and with 4 in
  flight (as a sender pipelines); the text packed and compressed as trainer_hooks sends it
  (`trainer_hooks.wire.texts`), and as lists of strings (any other client, which the server
  packs and compresses itself); an ack means the text is stored, compressed; the ratio of the
  best rounds and the median of each round's own ratio; and what of the difference is
  receiving and decoding (frames refused right after decoding) and what validating and
  storing; apart, the client's encoding; and what the stored text takes in the database
  against its UTF-8 size;
- GET /api/runs/<id>/samples of one such step: without text (<= 100 ms) and with `text=1`
  (<= 300 ms), median of repeated requests, and the first one;
- the viewer's first paint in headless Chromium (the system one): navigation start to every
  sample of the step drawn, cold (fresh context) and warm (reload) (<= 500 ms).

Run: .venv/bin/python bench/samples.py [--steps 40] [--reads 20] [--rounds 9]
     [--typed-numbers] [--only ingest|api|viewer ...]  (ingest always runs: the others read
     its run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import LiveServer, ServerState  # noqa: E402
from trainer_hooks.wire import protocol as p  # noqa: E402
from trainer_hooks.wire.arrays import packable  # noqa: E402

N, GROUP, PROMPT_BYTES, COMPLETION_BYTES = 512, 8, 512, 1536
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WORDS = ("the of and to in is that for it as with was on be by this are at from or an which have "
         "not but can all were their has if would about more when there so one out some what into "
         "than them could only other time then also two may these its like first way even new "
         "answer therefore compute sum equals step check because value total result").split()


PIPELINE = 4  # messages in flight for the pipelined ingest figure


def corpus(rng: np.random.Generator, size: int = 1 << 21) -> str:
    words = rng.choice(WORDS, size // 5)
    stops = rng.random(words.size) < 0.08
    return "".join(w + (".\n" if s else " ") for w, s in zip(words.tolist(), stops.tolist(),
                                                             strict=True))


# How a message carries its text: none; lists of strings (what any client may send: JSON,
# plain msgpack); packed (`trainer_hooks.wire.texts`: what trainer_hooks sends, compressed by
# the sender).
FORMS = ("none", "lists", "packed")


TYPED = False  # --typed-numbers: number columns as typed arrays, as trainer_hooks sends them


def _encode(msg: dict[str, Any], form: str) -> bytes:
    if form == "packed":
        return p.encode_msgpack(msg)  # text packed; numpy number columns as typed arrays
    typed = {k: ({m: packable(c) for m, c in v.items()} if k == "metrics" else packable(v))
             for k, v in msg.items()}
    return msgpack.packb(typed)


def frames(steps: int, run: str, form: str, seed: int = 0) -> list[bytes]:
    text = form != "none"
    numbers = (lambda a: a) if TYPED else (lambda a: a.tolist())
    rng = np.random.default_rng(seed)
    pool = corpus(rng) if text else ""
    out = []
    for step in range(steps):
        ids = np.arange(N)
        msg: dict[str, Any] = {
            "v": 1, "id": f"{run}-{step}", "type": "samples", "run": run, "step": step,
            "env": "math", "sample_id": numbers(ids), "group_id": numbers(ids // GROUP),
            "reward": numbers(rng.integers(0, 2, N).astype(float)),
            "advantage": numbers(rng.normal(0, 1, N)),
            "prompt_tokens": numbers(rng.integers(50, 300, N)),
            "completion_tokens": numbers(rng.integers(10, 2000, N)),
            "metrics": {f"m{k}": numbers(rng.normal(k, 1, N)) for k in range(4)},
        }
        if text:
            starts = rng.integers(0, len(pool) - COMPLETION_BYTES, size=(2, N)).tolist()
            prompt = [pool[a:a + PROMPT_BYTES] for a in starts[0][::GROUP] for _ in range(GROUP)]
            msg["prompt"] = prompt
            msg["completion"] = [pool[a:a + COMPLETION_BYTES] for a in starts[1]]
        out.append(_encode(msg, form))
    return out


async def stream(url: str, token: str, data: list[bytes], reply: bytes = b'"ack"',
                 window: int = 1) -> float:
    """Seconds to send every frame with at most `window` unanswered (1: each after the
    previous one's reply; trainer_hooks keeps up to 32 frames in flight)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        start = time.perf_counter()
        sent = answered = 0
        while answered < len(data):
            while sent < len(data) and sent - answered < window:
                await ws.send(data[sent])
                sent += 1
            got = answer if isinstance(answer := await ws.recv(), bytes) else answer.encode()
            assert reply in got, got
            answered += 1
        return time.perf_counter() - start


def get(url: str) -> tuple[float, Any]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as res:
        body = json.loads(res.read())
    return (time.perf_counter() - t) * 1000, body


def run_id(server: LiveServer, name: str) -> int:
    return int(next(r["id"] for r in get(server.http + "/api/runs")[1]["runs"]
                    if r["name"] == name))


def client_encoding(steps: int) -> None:
    """The client's part that the streams below leave out (their frames are encoded up front):
    encoding a message with the wire's own encoder (trainer_hooks.wire: packing and
    compressing the text), ms per message."""
    for text in (False, True):
        msgs = [p.decode(f, "msgpack") for f in frames(min(steps, 10), "client",
                                                       "lists" if text else "none", seed=5)]
        start = time.perf_counter()
        for m in msgs:
            p.encode_msgpack(m)
        ms = (time.perf_counter() - start) / len(msgs) * 1000
        print(f"  client: encoding a message {'with' if text else 'without'} text: {ms:.1f} ms",
              flush=True)


def bench_ingest(server: LiveServer, token: str, steps: int, rounds: int) -> None:
    url = server.ws + "/ws/ingest/"
    per_msg: dict[str, list[float]] = {}
    for i in range(rounds):
        for form in FORMS:  # interleaved: the load moves
            data = frames(steps, f"ingest-{form}-{i}", form)
            seconds = asyncio.run(stream(url, token, data))
            per_msg.setdefault(form, []).append(seconds / steps * 1000)
            mb = sum(map(len, data)) / 1e6
            print(f"  ingest, text {form}: {steps * N / seconds:,.0f} samples/s acked, "
                  f"{per_msg[form][-1]:.1f} ms per message ({steps} messages of {N}, "
                  f"{mb:.1f} MB; stored and compressed when acked)", flush=True)
    # The floor: the same frames refused right after decoding (a wrong version), so what the
    # transport and msgpack cost before anything is validated or stored.
    floor = {}
    for form in FORMS:
        refused = [_encode({**p.decode(f, "msgpack"), "v": 2}, form)
                   for f in frames(steps, "floor", form, seed=9)]
        floor[form] = asyncio.run(stream(url, token, refused, b'"bad_version"')) / steps * 1000
        print(f"  receiving and decoding alone, text {form}: {floor[form]:.1f} ms per message",
              flush=True)
    plain = min(per_msg["none"])  # the best round of each
    for form, who in (("packed", "as trainer_hooks sends it (packed, compressed by the sender)"),
                      ("lists", "as lists of strings (any other client)")):
        with_text = min(per_msg[form])
        stored = (with_text - floor[form]) - (plain - floor["none"])
        paired = statistics.median(a / b for a, b in zip(per_msg[form], per_msg["none"],
                                                          strict=True))
        print(f"ingest, text {who}: {N * 1000 / plain:,.0f} samples/s without text, "
              f"{N * 1000 / with_text:,.0f} with: RATIO {with_text / plain:.2f}x of the best "
              f"rounds, {paired:.2f}x the median of the {rounds} rounds' own ratios (target "
              f"within 2x; {plain:.1f} vs {with_text:.1f} ms per message). Of the difference, "
              f"receiving and decoding the text takes {floor[form] - floor['none']:.1f} ms, "
              f"validating and storing it {stored:.1f} ms")
    # As the sender sends: several messages in flight, so receiving the next one overlaps
    # storing (and compressing, off the GIL) this one.
    piped: dict[str, list[float]] = {}
    for i in range(rounds):
        for form in FORMS:
            data = frames(steps, f"piped-{form}-{i}", form)
            seconds = asyncio.run(stream(url, token, data, window=PIPELINE))
            piped.setdefault(form, []).append(seconds / steps * 1000)
    plain = min(piped["none"])
    for form in ("packed", "lists"):
        with_text = min(piped[form])
        paired = statistics.median(a / b for a, b in zip(piped[form], piped["none"],
                                                          strict=True))
        print(f"ingest, {PIPELINE} messages in flight, text {form}: {N * 1000 / plain:,.0f} "
              f"samples/s without text, {N * 1000 / with_text:,.0f} with: RATIO "
              f"{with_text / plain:.2f}x of the best rounds, {paired:.2f}x the median of the "
              f"rounds' own ratios ({plain:.1f} vs {with_text:.1f} ms per message)")


def stored_text(data_dir: Path) -> None:
    """What the text of the runs above takes in the database (the embedded SQLite file) against
    its UTF-8 size, and by format byte (ingest.core.texts)."""
    import sqlite3

    with sqlite3.connect(f"file:{data_dir / 'telescope.sqlite3'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT substr(data, 1, 1), COUNT(*), SUM(nbytes), SUM(length(data))"
                          " FROM ingest_sampletext GROUP BY 1").fetchall()
    utf8, stored = sum(r[2] for r in rows), sum(r[3] for r in rows)
    kinds = ", ".join(f"{r[1]} rows of format {r[0][0]}" for r in rows)
    print(f"text stored: {stored / 1e6:.1f} MB for {utf8 / 1e6:.1f} MB of UTF-8 text "
          f"({utf8 / max(stored, 1):.1f}x smaller; {kinds})")


def bench_api(server: LiveServer, rid: int, step: int, reads: int) -> None:
    base = f"{server.http}/api/runs/{rid}/samples?step={step}&limit=1000"
    for label, url, target in (("without text", base, 100), ("with text", base + "&text=1", 300)):
        first, body = get(url)
        times = [get(url)[0] for _ in range(reads)]
        size = len(json.dumps(body)) / 1e6
        print(f"api {label}: first {first:.1f} ms, median {statistics.median(times):.1f} ms, "
              f"p95 {np.percentile(times, 95):.1f} ms ({body['total']} samples, {size:.2f} MB "
              f"JSON; target <= {target} ms)")


# The page's own marks: its first screen of samples painted (the frame after it was drawn), and
# every sample of the step in the page.
MARKS = """
document.addEventListener('telescope:samples-painted', (e) => { window.__painted = e.detail.at; });
new MutationObserver((_, obs) => {
  const root = document.querySelector('#samples[data-loaded]');
  if (root) { window.__all = performance.now(); obs.disconnect(); }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-loaded']});
"""
PAINTED = """() => new Promise(done => {
  const check = () => (window.__painted && window.__all
    ? done([window.__painted, window.__all, document.querySelectorAll('.sample').length])
    : setTimeout(check, 5));
  check();
})"""


def bench_viewer(server: LiveServer, rid: int, step: int) -> None:
    from playwright.sync_api import sync_playwright

    url = f"{server.http}/runs/{rid}/samples?step={step}"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        cold, warm, text, search = [], [], [], []
        for _ in range(3):
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_init_script(MARKS)
            page = context.new_page()
            page.goto(url, wait_until="commit")
            cold.append(page.evaluate(PAINTED))
            page.reload(wait_until="commit")
            warm.append(page.evaluate(PAINTED))
            assert cold[-1][2] == warm[-1][2] == N, (cold, warm)
            t = time.perf_counter()
            page.locator(".sample-summary").first.click()
            page.locator(".sample-detail pre").first.wait_for()
            text.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            page.locator("#text-search").fill("answer")  # every sample's text, then marks
            page.wait_for_function("document.querySelector('#search-status').textContent")
            search.append((time.perf_counter() - t) * 1000)
            context.close()
        browser.close()
    def med(xs: list[list[float]], i: int) -> float:
        return statistics.median(x[i] for x in xs)

    print(f"viewer first paint (the first screen of a {N}-sample step): cold {med(cold, 0):.0f}"
          f" ms, warm {med(warm, 0):.0f} ms (median of 3; target <= 500 ms); all {N} samples in "
          f"the page: cold {med(cold, 1):.0f} ms, warm {med(warm, 1):.0f} ms; a sample's text "
          f"shown {statistics.median(text):.0f} ms after its click (the text of its 64 fetched);"
          f" a search over every sample's text {statistics.median(search):.0f} ms (150 ms of it "
          "typing debounce)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=9, help="ingest rounds (each: without "
                        "text, then with it packed, then as lists); the machine's noise moves "
                        "one round's figures by up to 2x, so several")
    parser.add_argument("--typed-numbers", action="store_true", help="number columns as "
                        "typed arrays (as trainer_hooks sends them) instead of lists")
    parser.add_argument("--only", choices=("ingest", "api", "viewer"), action="append",
                        help="run only these parts (repeatable; default: all)")
    args = parser.parse_args()
    global TYPED
    TYPED = args.typed_numbers
    with tempfile.TemporaryDirectory() as tmp:
        state = ServerState(Path(tmp))
        server = LiveServer(state).start()
        try:
            token = state.token("bench")
            only = set(args.only or ("ingest", "api", "viewer"))
            print(f"load: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
                  flush=True)
            client_encoding(args.steps)
            bench_ingest(server, token, args.steps, args.rounds)
            stored_text(Path(tmp))
            rid = run_id(server, "ingest-packed-0")
            if "api" in only:
                bench_api(server, rid, args.steps // 2, args.reads)
            if "viewer" in only:
                bench_viewer(server, rid, args.steps // 2)
        finally:
            server.stop()
    print("targets: ingest with text within 2x of without; api <= 100 ms without text, "
          "<= 300 ms with; viewer first paint <= 500 ms")


if __name__ == "__main__":
    main()
