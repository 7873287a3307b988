"""Read benchmark: a run of 10,000 steps × 300 step keys + 8 sample metrics; catalog time, and
series time for 20 ids at max_points=1500 (server side: the view's work, cold and warm cache).

Target: ≤ 50 ms for the 20 series.  Run: .venv/bin/python bench/read.py [--steps N]
The run is built through the real ingest path into a SQLite file (or DATABASE_URL) once, and
reused on the next run of the benchmark (--data DIR).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup(data: Path) -> None:
    os.environ.setdefault("TELESCOPE_DATA_DIR", str(data))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "telescope_ui.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build(steps: int, keys: int, samples_per_step: int) -> int:
    from ingest.models import Project, Run
    from ingest.pipeline.materialize import materialize_all
    from ingest.write.frames import handle_object

    existing = Run.objects.filter(name=f"read-bench-{steps}").first()
    if existing is not None:
        return existing.pk
    project = Project.objects.get_or_create(name="bench")[0].pk
    rng = np.random.default_rng(0)
    names = [f"section{k % 10}/group{k % 7}/metric{k}" for k in range(keys)]
    ids = np.arange(samples_per_step)
    t0 = time.perf_counter()
    for step in range(steps):
        values = rng.normal(0, 1, keys).tolist()
        run = f"read-bench-{steps}"
        handle_object(project, {"v": 1, "id": f"s{step}", "type": "step", "run": run,
                                "step": step, "metrics": dict(zip(names, values, strict=True))})
        handle_object(project, {
            "v": 1, "id": f"m{step}", "type": "samples", "run": run, "step": step,
            "sample_id": ids.tolist(), "group_id": (ids // 8).tolist(),
            "reward": rng.integers(0, 2, samples_per_step).astype(float).tolist(),
            "metrics": {f"m{k}": rng.normal(k, 1, samples_per_step).tolist() for k in range(8)},
        })
        if step % 250 == 249:
            materialize_all()
            rate = (step + 1) / (time.perf_counter() - t0)
            print(f"\rbuilding: {step + 1}/{steps} steps ({rate:.0f} steps/s)", end="",
                  flush=True)
    materialize_all()
    print()
    return Run.objects.get(name=f"read-bench-{steps}").pk


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "bench-read")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    setup(args.data)
    from django.test import Client

    from ingest.models import Run, Series
    from ingest.reads import catalog as reads

    run_id = build(args.steps, args.keys, args.samples)
    run = Run.objects.get(pk=run_id)
    client = Client()
    cat = timed(lambda: reads.catalog(run), 5)
    n_series = Series.objects.filter(run=run).count()
    print(f"run: {args.steps} steps, {n_series} series")
    print(f"catalog: median {statistics.median(cat):.1f} ms (reads.catalog)")
    step_ids = list(Series.objects.filter(run=run, kind="step").values_list("sid", flat=True))
    derived = list(Series.objects.filter(run=run, kind="sample", stat="mean")
                   .values_list("sid", flat=True))
    ids = step_ids[:14] + derived[:6]
    url = f"/api/runs/{run_id}/series?max_points=1500&ids=" + ",".join(
        __import__("urllib.parse").parse.quote(i, safe="") for i in ids)
    client.get("/api/runs")  # warm Django itself (URL resolver, middleware) before timing
    reads.CACHE.arrays.clear()
    reads.CACHE.size = 0
    reads.CACHE.seqs.clear()
    cold = timed(lambda: client.get(url), 1)
    warm = timed(lambda: client.get(url), 20)
    body = client.get(url).json()
    points = sum(len(s["value"]) for s in body["series"].values())
    print(f"series, 20 ids, max_points=1500 ({points} points returned): cold {cold[0]:.1f} ms, "
          f"warm median {statistics.median(warm):.1f} ms, p90 {np.percentile(warm, 90):.1f} ms "
          "(view incl. JSON)")
    print("target: <= 50 ms for the 20 series")


if __name__ == "__main__":
    main()
