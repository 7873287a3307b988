"""Benchmark: what logging costs the training loop (issue 30: ≤ 50 µs per step).

    .venv/bin/python bench/trainer_cost.py [--steps 2000] [--keys 40] [--samples 512]
        [--group 16] [--metrics 8] [--lists] [--work matmul|python] [--work-ms 1.5]
        [--repeat 3] [--variants bare,thread,process] [--base DIR] [--real-server]

The workload of devtools/peers_gen.py (per step one `log_step` of 40 keys and one `log_samples`
of 512 samples in groups of 16 with 8 sample metrics, as numpy arrays) logged from a loop that
also does a fixed "training step" of CPU work on the same thread: a float64 matmul on one BLAS
thread sized to take `--work-ms` (numpy releases the GIL inside it, as a framework's kernels
do), or with `--work python` a pure-Python loop of that length (holding the GIL throughout).

Each variant runs in a process of its own, the variants alternated round by round, `--repeat`
rounds (medians):

- `bare`: the loop with the work only;
- `thread`: the loop logging to a client with the in-process sender thread (the default);
- `process`: the same with `connect(..., sender="process")`: batching, encoding, the outbox and
  the WebSocket in a helper process fed through shared memory.

`--base DIR` (a `git worktree` of an earlier commit) adds `base:thread` and `base:process`: the
same loops with that checkout's `trainer_hooks`, alternated with the others in the same run
(a before/after measured under the same load).

**Trainer cost per step** = (loop time with logging − the bare loop's) / steps: everything the
loop pays — the log calls themselves, and the GIL the sender thread holds while the loop wants
it. It does *not* include the CPU a helper process uses on another core: on this 2-core machine
that process competes for the second core (with the server), not for the trainer's GIL — the
point of it — but when the machine is oversubscribed (other jobs: see the load) every extra
process also takes wall time from the loop, so the loop's wall time is split (Linux's
/proc/thread-self/schedstat, with − bare): the loop thread's own CPU (`time.thread_time`),
its time waiting for a core while runnable (the machine's other load, our sender's CPU
among it), and the rest, blocked while not runnable — for this loop only the GIL, held by the
sender thread (≈ 0 with a sender process). Also printed: the sender's CPU per step from the
loop's start until `close()` returned (the process's other threads in the thread variant:
getrusage minus the loop thread's; in the process variant the helper's own figure), the
caller's own time per step (perf_counter around the two log calls), the wait in `close()` after
the loop, and the load average.

The server is by default a sink in its own process (a WebSocket server that decodes each frame
and acknowledges every message, ~0.1 ms per frame), so the figure is the client's; with
`--real-server` it is the dashboard (daphne, embedded SQLite, its worker), whose CPU then also
competes for the trainer's core. Exits non-zero when a client's `close()` did not return True.
"""

from __future__ import annotations

import os

# One BLAS thread: the "training step" uses one core, as a trainer's Python thread does.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from devtools import peers_gen  # noqa: E402

TARGET_US = 50.0
MARK = "@@result "


# ---------------------------------------------------------------- the training step


def matmul_work(size: int) -> Any:
    a = np.random.default_rng(1).random((size, size))

    def work() -> None:
        a @ a

    return work


def python_work(n: int) -> Any:
    def work() -> None:
        x = 0
        for i in range(n):
            x += i

    return work


def calibrate(kind: str, ms: float) -> int:
    """The matmul size (or loop count) whose one run takes about `ms` ms here."""
    make = matmul_work if kind == "matmul" else python_work
    param = 64 if kind == "matmul" else 1000
    for _ in range(40):
        work = make(param)
        work()
        t0 = time.perf_counter()
        for _ in range(20):
            work()
        took = (time.perf_counter() - t0) / 20 * 1000
        if abs(took - ms) < 0.05 * ms:
            break
        scale = ms / max(took, 1e-3)
        param = max(8, int(param * (scale ** (1 / 3) if kind == "matmul" else scale)))
    return param


# ---------------------------------------------------------------- one process per variant


def _cpu_self() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def child(ns: argparse.Namespace) -> int:
    w = peers_gen.from_args(ns)
    # (with --lists each step's lists are made in the loop, as a reward function returns
    # them, by every variant alike: part of the step's work, outside the caller's time)
    step_metrics, columns = peers_gen.generate(dataclasses.replace(w, lists=False))
    cols_of = peers_gen.as_lists if w.lists else _same
    work = (matmul_work if ns.work == "matmul" else python_work)(ns.work_param)
    for _ in range(50):
        work()
    out: dict[str, Any] = {"variant": ns.child}
    client = None
    if ns.child != "bare":
        if ns.root:  # another checkout's client (--base)
            sys.path.insert(0, ns.root)
        from trainer_hooks import connect

        opts: dict[str, Any] = {"spool_dir": ns.spool,
                                "sender": ns.child.removeprefix("base:")}
        client = connect(ns.url, ns.token, f"cost-{ns.child}-{ns.round}",
                         config={"bench": "trainer_cost"}, **opts)
        assert client.flush(60), client.not_stored  # run.start answered: steady state
    h0 = _helper_cpu(client)
    perf = time.perf_counter
    caller = 0.0
    s0 = _schedstat()
    c0, p0, t0 = time.thread_time(), _cpu_self(), perf()
    if client is None:
        for step in range(w.steps):
            work()
            cols = cols_of(columns[step])
            a = perf()
            step_metrics[step].get("train/metric_00")
            cols.get("reward")
            caller += perf() - a
    else:
        log_step, log_samples = client.log_step, client.log_samples
        for step in range(w.steps):
            work()
            cols = cols_of(columns[step])
            a = perf()
            log_step(step, step_metrics[step])
            log_samples(step, **cols)
            caller += perf() - a
    out["loop_s"] = perf() - t0
    out["caller_s"] = caller
    out["loop_cpu_s"] = time.thread_time() - c0
    s1 = _schedstat()
    # off the CPU while runnable (other threads and processes had the cores), and the rest of
    # the loop's wall time: waiting while not runnable (the GIL; nothing else blocks this loop)
    out["runq_s"] = s1[1] - s0[1]
    out["blocked_s"] = max(0.0, out["loop_s"] - (s1[0] - s0[0]) - out["runq_s"])
    if client is not None:
        ok = client.close(600, status="finished")
        out["wait_s"] = perf() - t0 - out["loop_s"]
        out["ok"] = ok
        if not ok:
            print(f"close() returned False: {client.not_stored}", file=sys.stderr)
    out["others_cpu_s"] = _cpu_self() - p0 - (time.thread_time() - c0)
    out["helper_cpu_s"] = _helper_cpu(client) - h0
    print(MARK + json.dumps(out), flush=True)
    return 0 if out.get("ok", True) else 1


def _schedstat() -> tuple[float, float]:
    """This thread's seconds on a CPU and waiting for one while runnable (Linux's
    /proc/thread-self/schedstat; zeros elsewhere)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            run, wait = f.read().split()[:2]
    except OSError:
        return 0.0, 0.0
    return int(run) / 1e9, int(wait) / 1e9


def _same(columns: Any) -> Any:
    return columns


def _helper_cpu(client: Any) -> float:
    """CPU seconds of the client's helper process so far (what it last reported), else 0."""
    return float(getattr(getattr(client, "_engine", None), "cpu", 0.0))


# ---------------------------------------------------------------- the sink server


def sink(port_file: str) -> int:
    """A WebSocket server that acknowledges every message of every frame."""
    import asyncio

    import msgpack
    import orjson
    from websockets.asyncio.server import serve

    async def handler(ws: Any) -> None:
        async for frame in ws:
            if isinstance(frame, str):
                obj = orjson.loads(frame)
            else:
                obj = msgpack.unpackb(frame, raw=False, strict_map_key=False)
            batch = isinstance(obj, list)
            replies = []
            for m in obj if batch else [obj]:
                reply: dict[str, Any] = {"type": "ack", "id": m["id"]}
                if m.get("type") == "run.start":
                    reply.update(run_id=1, run_name=m["run"])
                replies.append(reply)
            await ws.send(orjson.dumps(replies if batch else replies[0]).decode())

    async def main() -> None:
        async with serve(handler, "127.0.0.1", 0, compression=None,
                         max_size=64 << 20) as server:
            Path(port_file).write_text(str(next(iter(server.sockets)).getsockname()[1]))
            await asyncio.Future()

    asyncio.run(main())
    return 0


class Sink:
    def __init__(self, tmp: Path) -> None:
        port_file = tmp / "sink.port"
        self.proc = subprocess.Popen([sys.executable, __file__, "--sink", str(port_file)])
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("the sink server did not start")
            time.sleep(0.05)
        self.ws = f"ws://127.0.0.1:{port_file.read_text()}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


# ---------------------------------------------------------------- the parent


def run_variant(ns: argparse.Namespace, variant: int | str, rnd: int, url: str, token: str,
                spool: Path, param: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(variant), "--round", str(rnd),
           "--url", url, "--token", token, "--spool", str(spool), "--work", ns.work,
           "--work-param", str(param), *peers_gen.from_args(ns).args()]
    if str(variant).startswith("base:"):
        cmd += ["--root", str(ns.base.resolve())]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode or not lines:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"variant {variant} failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(lines[-1][len(MARK):])
    result["load"] = os.getloadavg()[0]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    peers_gen.add_arguments(ap)
    ap.add_argument("--work", choices=("matmul", "python"), default="matmul")
    ap.add_argument("--work-ms", type=float, default=1.5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default="bare,thread,process")
    ap.add_argument("--real-server", action="store_true")
    ap.add_argument("--base", type=Path, help="another checkout: its client measured too")
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--token", help=argparse.SUPPRESS)
    ap.add_argument("--spool", help=argparse.SUPPRESS)
    ap.add_argument("--work-param", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sink", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.sink:
        return sink(ns.sink)
    if ns.child:
        return child(ns)
    variants = ns.variants.split(",")
    if ns.base is not None:
        variants += [f"base:{v}" for v in variants if v in ("thread", "process")]
    param = calibrate(ns.work, ns.work_ms)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if ns.real_server:
            from devtools.live_server import ServerState, running

            state = ServerState(tmp / "server")
            ctx: Any = running(state)
            server = ctx.__enter__()
            url, token, stop = server.ws, state.token("bench"), lambda: ctx.__exit__(None,
                                                                                    None, None)
        else:
            sink_server = Sink(tmp)
            url, token, stop = sink_server.ws, "t", sink_server.stop
        try:
            for rnd in range(ns.repeat):
                for v in variants:
                    r = run_variant(ns, v, rnd, url, token, tmp / "spool", param)
                    runs[v].append(r)
                    print(f"round {rnd + 1} {v:8s} loop {r['loop_s']:.3f} s, caller "
                          f"{r['caller_s'] / ns.steps * 1e6:.1f} µs/step, sender CPU "
                          f"{(r['others_cpu_s'] + r['helper_cpu_s']) / ns.steps * 1e6:.0f} "
                          f"µs/step, wait {r.get('wait_s', 0):.2f} s (load {r['load']:.1f})",
                          flush=True)
        finally:
            stop()  # type: ignore[no-untyped-call]
    return report(ns, runs, param)


def report(ns: argparse.Namespace, runs: dict[str, list[dict[str, Any]]], param: int) -> int:
    steps = ns.steps

    def med(v: str, key: str) -> float:
        return float(statistics.median(r.get(key, 0.0) for r in runs[v]))

    w = peers_gen.from_args(ns)
    loads = [r["load"] for rs in runs.values() for r in rs]
    print(f"\n{steps:,} steps × ({w.keys} keys + {w.samples} samples in groups of {w.group}, "
          f"{w.metrics} metrics, as {'lists' if w.lists else 'arrays'}), work "
          f"{ns.work} ({param}) ≈ {ns.work_ms} ms a step, {ns.repeat} rounds, "
          f"{'the dashboard server' if ns.real_server else 'a sink server'}; "
          f"load {min(loads):.1f}–{max(loads):.1f}")
    bare = med("bare", "loop_s") if "bare" in runs else None
    verdict = True
    for v in runs:
        line = f"{v:8s} loop {med(v, 'loop_s'):.3f} s"
        if v != "bare":
            sender = statistics.median((r["others_cpu_s"] + r["helper_cpu_s"]) for r in runs[v])
            line += (f"; caller {med(v, 'caller_s') / steps * 1e6:.1f} µs/step; sender CPU "
                     f"{sender / steps * 1e6:.0f} µs/step; wait after the loop "
                     f"{med(v, 'wait_s'):.2f} s")
            if bare is not None:
                cost = (med(v, "loop_s") - bare) / steps * 1e6
                each = [(r["loop_s"] - b["loop_s"]) / steps * 1e6
                        for r, b in zip(runs[v], runs["bare"], strict=False)]
                cpu = (med(v, "loop_cpu_s") - med("bare", "loop_cpu_s")) / steps * 1e6
                blocked = (med(v, "blocked_s") - med("bare", "blocked_s")) / steps * 1e6
                runq = (med(v, "runq_s") - med("bare", "runq_s")) / steps * 1e6
                line += (f"; trainer cost {cost:.0f} µs/step (rounds "
                         f"{', '.join(f'{c:.0f}' for c in each)}) "
                         f"[{'met' if cost <= TARGET_US else 'MISSED'}]; the loop thread's own "
                         f"CPU {cpu:+.0f}, blocked (the GIL) {blocked:+.0f}, waiting for a core "
                         f"{runq:+.0f} µs/step")
                verdict = verdict and (v != "process" or cost <= TARGET_US)
        print(line)
    print(f"target: trainer cost ≤ {TARGET_US:.0f} µs per step")
    return 0 if all(r.get("ok", True) for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
