"""Benchmark: the whole logging job, ours beside trackio, each timed as a user sees it.

    .venv/bin/pip install -e ".[bench]"       # trackio
    .venv/bin/python bench/vs_trackio.py [--repeat 3] [--lists] [--base DIR] [--work-us 0]
                                         [--steps 2000 --keys 40 --samples 512 --group 16
                                          --metrics 8]

Each side is a whole process (`subprocess`), timed from spawn to exit: Python's start, the
imports, generating the workload (devtools/peers_gen.py, the same module and seed in every
process), logging it, and the wait after the loop until everything is stored — ours:
`client.close()` returning True, which means stored and aggregated (close sends a barrier),
readable through the read API; trackio: `trackio.finish()` in its local mode (its own SQLite
under a temporary TRACKIO_DIR). trackio has no samples, so its process logs, per step, the
40 step keys plus the summary a trainer would compute for them (mean, std, min, max of the
reward and each sample metric, overall and per environment: `peers_gen.summary`); ours
hands over the samples and the server derives every family of docs/statistics.md.

Our side logs to a real server (daphne, embedded SQLite, the pipeline's worker process)
started by this script before the timing, one per checkout, kept across repeats (each
repeat a new run). `--base DIR` adds a third side: our client and server from another
checkout (a `git worktree` of an earlier commit), run with this venv, for a before/after in
one run. The sides alternate (their order rotates each round); medians of `--repeat` rounds.

Each child prints its own phase times (wall clock): start + import, generate, init
(`connect` / `trackio.init`), logging loop, wait after the loop, exit. With `--lists` (or the
`--lists-too` side) each step's lists are made in the loop, as a reward function returns them
(not a whole run of Python floats held at once); that time counts as generating. `--work-us N` gives
every step N µs of the trainer's own CPU work (a Python loop holding the GIL, calibrated
once) and times the loop twice in each child, without logging and then with it: the
trainer's cost per step (loop with logging minus without, the GIL the sender thread takes
included) and the caller's own CPU in it (main thread's CPU time, minus without).

The machine is shared: the 1-minute load average is printed per round; compare ratios from
one run, not absolute seconds across runs. Targets: ratio ≤ 1.0 (then 0.5); wait after the
loop ≤ 0.3 s; cost ≤ 50 µs per step.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MARK = "PHASES "
TARGET_RATIO, GOAL_RATIO, TARGET_WAIT_S, TARGET_COST_US = 1.0, 0.5, 0.3, 50.0
TARGET_LISTS = 1.15
PHASES = ("import", "generate", "init", "loop", "wait", "exit")


# ---------------------------------------------------------------- the children


def _busy(n: int) -> int:
    """The trainer's own work: a Python loop of n iterations, holding the GIL."""
    x = 0
    for i in range(n):
        x += i
    return x


def _calibrate(work_us: float) -> int:
    """Iterations of `_busy` that take `work_us` µs on this machine (best of a few)."""
    n = 100_000
    best = min(_timed(_busy, n) for _ in range(5))
    return max(1, int(n * work_us * 1e-6 / best))


def _timed(fn, *args) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def _peers_gen() -> ModuleType:
    """devtools/peers_gen.py of this checkout, loaded by its path (another checkout measured
    with --base may have none)."""
    spec = importlib.util.spec_from_file_location("peers_gen", ROOT / "devtools" / "peers_gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peers_gen"] = module  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(ns: argparse.Namespace) -> int:
    """One side's whole job; prints its phase stamps (time.time()) as one JSON line."""
    stamps = {"imported": 0.0}
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    sys.path.insert(0, str(Path(ns.root).resolve()))  # the checkout whose client is measured
    peers_gen = _peers_gen()  # this checkout's, whichever is measured

    work = peers_gen.from_args(ns)
    if ns.child == "ours":
        from trainer_hooks import connect
    else:
        os.environ["TRACKIO_DIR"] = ns.trackio_dir
        import trackio
    stamps["imported"] = time.time()
    # Lists are made step by step in the loop (timed apart, counted as generating), as a
    # reward function returns them, not held for the whole run at once.
    step_metrics, columns = peers_gen.generate(dataclasses.replace(work, lists=False))
    convert = 0.0
    n_busy = _calibrate(ns.work_us) if ns.work_us else 0
    stamps["generated"] = time.time()
    out: dict[str, float] = {}
    if n_busy:  # the loop without logging, for the cost per step
        c0, t0 = time.thread_time(), time.perf_counter()
        for step in range(work.steps):
            _busy(n_busy)
            step_metrics[step].get("train/metric_00")
            columns[step].get("reward")
        out["bare_loop"] = time.perf_counter() - t0
        out["bare_cpu"] = time.thread_time() - c0
        stamps["generated"] = time.time()
    if ns.child == "ours":
        client = connect(ns.ws, ns.token, ns.name, config={"bench": "vs_trackio"})
        stamps["init"] = time.time()
        c0, p0 = time.thread_time(), _process_cpu()
        for step in range(work.steps):
            if n_busy:
                _busy(n_busy)
            client.log_step(step, step_metrics[step])
            if work.lists:
                t = time.perf_counter()
                cols = peers_gen.as_lists(columns[step])
                convert += time.perf_counter() - t
            else:
                cols = columns[step]
            client.log_samples(step, **cols)
        out["loop_cpu"] = time.thread_time() - c0
        stamps["loop"] = time.time()
        ok = client.close(timeout=600)
        stamps["wait"] = time.time()
        out["others_cpu"] = _process_cpu() - p0 - (time.thread_time() - c0)
        if not ok:
            print(f"close() returned False: not stored {client.not_stored}", file=sys.stderr)
            return 1
    else:
        trackio.init(project="bench", name=ns.name, config={"bench": "vs_trackio"},
                     auto_log_cpu=False, auto_log_gpu=False)
        stamps["init"] = time.time()
        c0, p0 = time.thread_time(), _process_cpu()
        for step in range(work.steps):
            if n_busy:
                _busy(n_busy)
            row = dict(step_metrics[step])
            if work.lists:
                t = time.perf_counter()
                cols = peers_gen.as_lists(columns[step])
                convert += time.perf_counter() - t
            else:
                cols = columns[step]
            row.update(peers_gen.summary(cols))
            trackio.log(row, step=step)
        out["loop_cpu"] = time.thread_time() - c0
        stamps["loop"] = time.time()
        trackio.finish()
        stamps["wait"] = time.time()
        out["others_cpu"] = _process_cpu() - p0 - (time.thread_time() - c0)
    out["convert"] = convert
    print(MARK + json.dumps({"stamps": stamps, **out}), flush=True)
    return 0


# ---------------------------------------------------------------- the servers


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A dashboard server (daphne, embedded SQLite) from the checkout `root`, with its own data
    directory; as devtools/live_server.py starts one, with the checkout's own code."""

    def __init__(self, root: Path, tmp: Path, static: Path) -> None:
        self.root, self.port = root, _free_port()
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "REDIS_URL", "TELESCOPE_TEST_DB")}
        self.env.update(TELESCOPE_DATA_DIR=str(tmp), PYTHONPATH=str(root),
                        DJANGO_SETTINGS_MODULE="telescope_ui.settings",
                        TELESCOPE_STATIC_ROOT=str(static))
        self._manage("migrate", "-v", "0")
        self.token = self._manage("createtoken", "--project", "bench").split()[-1]
        self.log = open(tmp / "server.log", "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "telescope_ui.serve", "--port", str(self.port),
             "--verbosity", "0", "--no-collectstatic"],
            env=self.env, cwd=root, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the server of {root} did not start: see {tmp}/server.log")
            try:
                urllib.request.urlopen(self.http + "/api/runs", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _manage(self, *args: str) -> str:
        out = subprocess.run([sys.executable, str(self.root / "manage.py"), *args], env=self.env,
                             cwd=self.root, capture_output=True, text=True, timeout=300)
        if out.returncode:
            raise SystemExit(f"manage.py {' '.join(args)} failed in {self.root}:\n{out.stderr}")
        return out.stdout

    def check_readable(self, name: str, steps: int) -> None:
        """After close(): the run's every step has its reward mean (read-your-writes)."""
        with urllib.request.urlopen(self.http + "/api/runs", timeout=30) as resp:
            run = next(r for r in json.load(resp)["runs"] if r["name"] == name)
        sid = "reward|reward|mean|"
        with urllib.request.urlopen(f"{self.http}/api/runs/{run['id']}/series?ids="
                                    f"{urllib.parse.quote(sid, safe='')}&max_points=20000",
                                    timeout=60) as resp:
            got = json.load(resp)["series"][sid]
        if len(got["step"]) != steps:
            raise SystemExit(f"{self.root}: after close() {len(got['step'])} of {steps} steps "
                             "readable")

    def cpu(self) -> float:
        """CPU seconds the server process and its descendants (the pipeline's worker) have
        used so far (Linux's /proc; 0 elsewhere)."""
        return sum(_cpu(pid) for pid in _tree(self.proc.pid))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def _tree(pid: int) -> list[int]:
    """pid and its descendants, from /proc."""
    out = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child_pid in f.read().split():
                    out += _tree(int(child_pid))
    except OSError:
        pass
    return out


def _cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- the parent


@dataclass
class Side:
    label: str
    kind: str  # "ours" or "trackio"
    root: Path
    server: Server | None = None
    lists: bool = False  # this side hands the samples over as lists whatever --lists says
    runs: list[dict[str, float]] = field(default_factory=list)


def run_side(side: Side, ns: argparse.Namespace, workload_args: list[str], i: int,
             tmp: Path) -> dict[str, float]:
    name = f"{side.label}-{i}"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", side.kind,
           "--root", str(side.root), "--name", name, f"--work-us={ns.work_us}",
           *workload_args, *(["--lists"] if side.lists and "--lists" not in workload_args else [])]
    if side.server is not None:
        cmd += ["--ws", f"ws://127.0.0.1:{side.server.port}", "--token", side.server.token]
    else:
        cmd += ["--trackio-dir", str(tmp / f"trackio-{i}")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    load = os.getloadavg()[0]
    server_cpu = side.server.cpu() if side.server is not None else 0.0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    out = subprocess.run(cmd, env=env, cwd=side.root, capture_output=True, text=True,
                         timeout=1200)
    t1 = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    server_cpu = side.server.cpu() - server_cpu if side.server is not None else 0.0
    if out.returncode:
        raise SystemExit(f"{side.label} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    line = next(x for x in out.stdout.splitlines() if x.startswith(MARK))
    got = json.loads(line[len(MARK):])
    s = got["stamps"]
    marks = [t0, s["imported"], s["generated"], s["init"], s["loop"], s["wait"], t1]
    fig = {p: b - a for p, a, b in zip(PHASES, marks[:-1], marks[1:], strict=True)}
    fig["loop"] -= got["convert"]  # making the lists in the loop: generating, not logging
    fig["generate"] += got["convert"]
    fig.update(total=t1 - t0, load=load, loop_cpu=got["loop_cpu"], cpu_client=client_cpu,
               cpu_server=server_cpu, others_cpu=got["others_cpu"])
    if "bare_loop" in got:
        fig.update(bare_loop=got["bare_loop"], bare_cpu=got["bare_cpu"])
    if side.server is not None:
        side.server.check_readable(name, ns.steps)
    return fig


def _med(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report(sides: list[Side], ns: argparse.Namespace) -> None:
    w = ns
    print(f"\n{w.steps:,} steps × ({w.keys} step keys + {w.samples} samples in groups of "
          f"{w.group}, {w.metrics} sample metrics), samples as "
          f"{'Python lists' if w.lists else 'numpy arrays'}"
          + (f", {w.work_us:g} µs of trainer work per step" if w.work_us else "")
          + f"; medians of {ns.repeat}, whole process spawn → exit (s):")
    head = f"{'side':<14}{'total':>8}" + "".join(f"{p:>10}" for p in PHASES)
    print(head + f"{'CPU job':>10}{'server':>8}")
    for side in sides:
        r = side.runs
        print(f"{side.label:<14}{_med(r, 'total'):>8.2f}"
              + "".join(f"{_med(r, p):>10.3f}" for p in PHASES)
              + f"{_med(r, 'cpu_client') + _med(r, 'cpu_server'):>10.2f}"
              + f"{_med(r, 'cpu_server'):>8.2f}")
    print("each round (total s, CPU s of the job's processes, load):")
    for side in sides:
        print(f"  {side.label:<12}" + "  ".join(
            f"{x['total']:.2f} ({x['cpu_client'] + x['cpu_server']:.2f}, {x['load']:.1f})"
            for x in side.runs))
    track = next((s for s in sides if s.kind == "trackio"), None)
    for side in sides:
        if side.kind != "ours":
            continue
        if track is not None:
            ratios = [a["total"] / b["total"] for a, b in zip(side.runs, track.runs,
                                                               strict=True)]
            ratio = statistics.median(ratios)
            verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
            print(f"{side.label} / trackio, whole process: median {ratio:.2f}× (rounds: "
                  + ", ".join(f"{x:.2f}" for x in ratios)
                  + f"); target ≤ {TARGET_RATIO:.1f}: {verdict} (goal {GOAL_RATIO:.1f})")
            cpu = [(a["cpu_client"] + a["cpu_server"]) / b["cpu_client"]
                   for a, b in zip(side.runs, track.runs, strict=True)]
            print(f"{side.label} / trackio, CPU seconds of the job (client + server + worker): "
                  f"median {statistics.median(cpu):.2f}×")
        wait = _med(side.runs, "wait")
        print(f"{side.label}: wait after the loop median {wait:.2f} s; target ≤ "
              f"{TARGET_WAIT_S:.1f} s: {'met' if wait <= TARGET_WAIT_S else 'MISSED'}")
    arrays = next((s for s in sides if s.label == "ours"), None)
    lists = next((s for s in sides if s.label == "ours-lists"), None)
    if arrays is not None and lists is not None:
        ratio = statistics.median(a["total"] / b["total"]
                                  for a, b in zip(lists.runs, arrays.runs, strict=True))
        bare = statistics.median((a["total"] - a["generate"]) / (b["total"] - b["generate"])
                                 for a, b in zip(lists.runs, arrays.runs, strict=True))
        print(f"samples as lists / as arrays, whole process: median {ratio:.2f}× (target ≤ "
              f"{TARGET_LISTS:.2f}: {'met' if ratio <= TARGET_LISTS else 'MISSED'}); without "
              f"the generate phase (this script making the lists): {bare:.2f}×")
    for side in sides:
        others = statistics.median(1e6 * x["others_cpu"] / ns.steps for x in side.runs)
        print(f"{side.label}: CPU of the process's other threads (sender, writer) from the "
              f"loop's start to the end of the wait: median {others:.0f} µs per step (at most "
              "what they take of the trainer's GIL)")
        if "bare_loop" not in side.runs[0]:
            continue
        cost = [1e6 * (x["loop"] - x["bare_loop"]) / ns.steps for x in side.runs]
        own = [1e6 * (x["loop_cpu"] - x["bare_cpu"]) / ns.steps for x in side.runs]
        verdict = "met" if statistics.median(cost) <= TARGET_COST_US else "MISSED"
        print(f"{side.label}: trainer cost per step (loop with logging − without, this machine's "
              f"other processes included) median {statistics.median(cost):.0f} µs (rounds: "
              + ", ".join(f"{c:.0f}" for c in cost)
              + f"), of which the caller's own CPU {statistics.median(own):.0f} µs"
              + (f"; target ≤ {TARGET_COST_US:.0f} µs: {verdict}" if side.kind == "ours" else ""))
    la = os.getloadavg()
    print(f"load average now {la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f} (1 / 5 / 15 min)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    peers_gen = _peers_gen()
    peers_gen.add_arguments(ap)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", type=Path, help="another checkout: its client and server too")
    ap.add_argument("--no-trackio", action="store_true", help="our side(s) only")
    ap.add_argument("--lists-too", action="store_true",
                    help="one more side: ours with the samples as Python lists (same server)")
    ap.add_argument("--work-us", type=float, default=0.0)
    ap.add_argument("--child", choices=("ours", "trackio"), help=argparse.SUPPRESS)
    ap.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    ap.add_argument("--name", default="run", help=argparse.SUPPRESS)
    ap.add_argument("--ws", help=argparse.SUPPRESS)
    ap.add_argument("--token", help=argparse.SUPPRESS)
    ap.add_argument("--trackio-dir", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child:
        return child(ns)
    workload_args = peers_gen.from_args(ns).args()
    sys.path.insert(0, str(ROOT))
    from devtools.live_server import collected_static

    with tempfile.TemporaryDirectory(prefix="vs-trackio-") as d:
        tmp = Path(d)
        static = collected_static()
        sides = [Side("ours", "ours", ROOT)]
        if ns.lists_too:
            sides.append(Side("ours-lists", "ours", ROOT, lists=True))
        if ns.base is not None:
            sides.append(Side("base", "ours", ns.base.resolve()))
        if not ns.no_trackio:
            sides.append(Side("trackio", "trackio", ROOT))
        try:
            servers: dict[Path, Server] = {}
            for side in sides:
                if side.kind == "ours" and side.root not in servers:
                    (tmp / side.label).mkdir()
                    servers[side.root] = Server(side.root, tmp / side.label, static)
                side.server = servers.get(side.root) if side.kind == "ours" else None
            print(f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
            for i in range(ns.repeat):
                order = sides[i % len(sides):] + sides[:i % len(sides)]
                for side in order:
                    fig = run_side(side, ns, workload_args, i, tmp)
                    side.runs.append(fig)
                    print(f"round {i + 1} {side.label}: {fig['total']:.2f} s (" + ", ".join(
                        f"{p} {fig[p]:.2f}" for p in PHASES) + f"; CPU {fig['cpu_client']:.2f} + "
                        f"server {fig['cpu_server']:.2f}; load {fig['load']:.1f})",
                        flush=True)
        finally:
            for server in servers.values():
                server.stop()
        report(sides, ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
