"""The static pipeline (telescope_ui.assets, docs/architecture.md#static-files): `collectstatic`
into STATIC_ROOT with hashed names, ES module imports rewritten to them, gzip (and brotli) beside
each file; ServeStatic serves them in front of Django, cached for good. Against a real server
process, and the Metrics page's modules in Chromium."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from devtools.live_server import ROOT, LiveServer, ServerState, collected_static

HASHED = re.compile(r"/static/[\w./-]+\.[0-9a-f]{12}\.\w+")
# Relative module specifiers of a module: `import … from '…'`, `export … from '…'`,
# `import '…'` (statements, at the start of a line) and `import('…')`.
SPECIFIER = re.compile(r"""(?m)^[ \t]*(?:import|export)\s[\w$\s{},*]*?\sfrom\s*["']([^"']+)["']"""
                       r"""|^[ \t]*import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']""")


def specifiers(source: str) -> list[str]:
    return [next(g for g in groups if g) for groups in SPECIFIER.findall(source)]


class Response:
    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


def get(url: str, **headers: str) -> Response:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=30) as res:
            return Response(res.status, res.headers, res.read())
    except urllib.error.HTTPError as err:
        return Response(err.code, err.headers, err.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server with one run (one step) for the module's tests."""
    state = ServerState(tmp_path_factory.mktemp("static"), os.environ.get("DATABASE_URL"),
                        os.environ.get("REDIS_URL"))
    live = LiveServer(state).start()
    token = state.token("static")
    body = json.dumps([{"v": 1, "id": "s0", "type": "step", "run": "r", "step": 0,
                        "metrics": {"loss": 1.0}},
                       {"v": 1, "id": "b0", "type": "barrier", "run": "r"}]).encode()
    req = urllib.request.Request(live.http + "/api/ingest", data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as res:
        assert not json.loads(res.read())["errors"]
    yield live
    live.stop()
    state.drop()


def metrics_url(server: LiveServer) -> str:
    with urllib.request.urlopen(server.http + "/api/runs", timeout=30) as res:
        [run] = json.loads(res.read())["runs"]
    return f"{server.http}/runs/{run['id']}/metrics"


def test_pages_link_hashed_names_served_precompressed_and_cached_for_good(
        server: LiveServer) -> None:
    page = get(server.http + "/")
    assert page.headers["X-Frame-Options"] == "DENY"  # Django's middleware answered the page
    links = sorted(set(HASHED.findall(page.body.decode())))
    kinds = {Path(link).suffix for link in links}
    assert {".css", ".js", ".svg"} <= kinds
    for link in links:
        plain = get(server.http + link)
        assert plain.status == 200 and "Content-Encoding" not in plain.headers
        assert plain.headers["Cache-Control"] == "max-age=315360000, public, immutable"
        assert "X-Frame-Options" not in plain.headers  # ServeStatic answered: Django never saw it
        packed = get(server.http + link, **{"Accept-Encoding": "gzip"})
        assert packed.headers["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in packed.headers["Vary"]
        assert gzip.decompress(packed.body) == plain.body
        if importlib.util.find_spec("brotli"):  # brotli beside gzip only where it is installed
            import brotli

            br = get(server.http + link, **{"Accept-Encoding": "gzip, br"})
            assert br.headers["Content-Encoding"] == "br"
            assert brotli.decompress(br.body) == plain.body


def test_ranges_heads_and_revalidation_are_answered(server: LiveServer) -> None:
    page = get(server.http + "/").body.decode()
    [link] = set(re.findall(r"/static/js/runs\.[0-9a-f]{12}\.js", page))
    plain = get(server.http + link)
    part = get(server.http + link, Range="bytes=10-19")
    assert part.status == 206 and part.body == plain.body[10:20]
    assert part.headers["Content-Range"] == f"bytes 10-19/{len(plain.body)}"
    head = urllib.request.Request(server.http + link, method="HEAD")
    with urllib.request.urlopen(head, timeout=30) as res:
        assert res.status == 200 and res.read() == b""
        assert int(res.headers["Content-Length"]) == len(plain.body)
    again = get(server.http + link, **{"If-None-Match": plain.headers["ETag"]})
    assert again.status == 304 and again.body == b""


def test_module_imports_name_hashed_files_and_the_page_preloads_the_whole_graph(
        server: LiveServer) -> None:
    # The page's modules are its bundle (telescope_ui.bundle). The All view's page preloads all
    # but the Custom view's (the entry imports it with `import()` for that view alone); the
    # Custom view's page, the whole graph.
    lean = re.findall(r'<link rel="modulepreload" href="([^"]+)"',
                      get(metrics_url(server)).body.decode())
    page = get(metrics_url(server) + "?view=custom").body.decode()
    preloads = re.findall(r'<link rel="modulepreload" href="([^"]+)"', page)
    assert set(lean) < set(preloads) and not any(
        "/custom/" in url or "/sortablejs/" in url for url in lean)
    [entry] = re.findall(r'<script type="module" src="([^"]+)"', page)
    assert entry in preloads and all(HASHED.fullmatch(url) for url in preloads)
    graph, todo = {entry}, [entry]
    while todo:
        url = todo.pop()
        module = get(server.http + url)
        assert module.status == 200 and "javascript" in module.headers["Content-Type"], url
        for spec in specifiers(module.body.decode()):
            assert re.fullmatch(r"\.{1,2}/[\w./-]+\.[0-9a-f]{12}\.js", spec), (url, spec)
            target = os.path.normpath(os.path.join(os.path.dirname(url), spec))
            if target not in graph:
                graph.add(target)
                todo.append(target)
    assert graph == set(preloads) and all(url.startswith("/static/js/bundle/") for url in graph)
    assert len(graph) <= 4  # the entry, the Custom view, the chunk(s) they share
    [plotly] = re.findall(r'<link id="plotly-src" rel="preload" as="script" href="([^"]+)"', page)
    assert HASHED.fullmatch(plotly) and plotly.startswith("/static/vendor/plotly/plotly.min.")


def test_vendor_files_come_from_their_packages(server: LiveServer) -> None:
    paths = json.loads((collected_static() / "staticfiles.json").read_text())["paths"]
    from telescope_ui.bundle import plotly_file

    built = plotly_file(ROOT / "node_modules")  # from its sources: its core and heatmap
    assert built is not None
    sources = {
        "vendor/plotly/plotly.min.js": built,
        "vendor/sortablejs/sortable.esm.js":
            ROOT / "node_modules/sortablejs/modular/sortable.esm.js",
    }
    for name, source in sources.items():
        served = get(f"{server.http}/static/{paths[name]}")
        assert served.status == 200 and "immutable" in served.headers["Cache-Control"]
        assert "javascript" in served.headers["Content-Type"]
        assert served.body == source.read_bytes()
    plotly = built.read_text()
    assert plotly.startswith("/**\n* plotly.js v3.1.0 (core, heatmap") and "var Plotly=" in plotly


def test_unknown_unhashed_and_outside_names_are_404(server: LiveServer) -> None:
    for path in ("/static/js/nope.js", "/static/js/metrics.js", "/static/css/app.css",
                 "/static/vendor/plotly/plotly.min.js", "/static/plotly.min.js",
                 "/static/staticfiles.json", "/static/js/%2e%2e/%2e%2e/manage.py"):
        assert get(server.http + path).status == 404, path


PROSE = """\
// A module whose comments talk: export it as a file and import one (a new dashboard), or
// import x from './missing.js' — neither is a statement.

import {
  h,
  byId,
} from './core/dom.js';
import './charts/features.js';
export { compileSearch } from "./core/text.js";

export async function later() {
  return import('./charts/heatmap.js');
}
"""


def test_collect_rewrites_imports_and_runs_only_when_a_source_changed(tmp_path: Path) -> None:
    from telescope_ui import assets

    src, root = tmp_path / "src", tmp_path / "root" / "static"
    shutil.copytree(ROOT / "static", src)
    (src / "js" / "prose.js").write_text(PROSE)
    with override_settings(STATICFILES_DIRS=[src], STATIC_ROOT=root):
        assert assets.collect() is True
        paths = json.loads((root / "staticfiles.json").read_text())["paths"]
        prose = (root / paths["js/prose.js"]).read_text()
        specs = specifiers(prose)
        assert len(specs) == 4  # the comment's "import x from" is prose, left alone
        names = ("core/dom", "charts/features", "core/text", "charts/heatmap")
        for spec, name in zip(specs, names, strict=True):  # in subfolders, relative to js/
            assert spec == "./" + paths[f"js/{name}.js"].removeprefix("js/")
        assert "'./missing.js'" in prose
        assert (root / (paths["js/core/text.js"] + ".gz")).is_file()
        assert not (root / "js" / "core" / "text.js").exists()  # only hashed names are kept

        assert assets.collect() is False  # nothing changed: nothing done
        with open(src / "js" / "core" / "text.js", "a") as f:
            f.write("\n// edited\n")
        assert assets.collect() is True
        edited = json.loads((root / "staticfiles.json").read_text())["paths"]
        assert edited["js/core/text.js"] != paths["js/core/text.js"]
        assert not (root / paths["js/core/text.js"]).exists()  # the old version is gone
        # A module importing it names the new version, so its own hash changed too.
        assert edited["js/prose.js"] != paths["js/prose.js"]
        assert edited["js/core/dom.js"] == paths["js/core/dom.js"]
        assert assets.collect() is False
        # The Metrics page's bundle (telescope_ui.bundle) is made from the same sources when
        # they change (a comment is not in it: a statement is).
        with open(src / "js" / "core" / "text.js", "a") as f:
            f.write("console.debug('edited');\n")
        assert assets.collect() is True
        again = json.loads((root / "staticfiles.json").read_text())["paths"]
        assert again["js/bundle/metrics.js"] != edited["js/bundle/metrics.js"]
        bundled = "".join((root / again[name]).read_text() for name in again
                          if name.startswith("js/bundle/"))
        assert "console.debug('edited')" in bundled or 'console.debug("edited")' in bundled


@pytest.mark.browser
def test_the_metrics_page_loads_every_module_in_chromium(server: LiveServer) -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed (CI=true: browser tests must run)")
        pytest.skip("chromium is not installed")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    url = metrics_url(server)
    page_html = get(url).body.decode()
    preloads = set(re.findall(r'<link rel="modulepreload" href="([^"]+)"', page_html))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium,
                                     args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            for view in ("all", "custom"):
                page = browser.new_context().new_page()
                problems: list[str] = []
                page.on("console", lambda m, p=problems: m.type == "error" and p.append(m.text))
                page.on("pageerror", lambda e, p=problems: p.append(str(e)))
                page.on("requestfailed", lambda r, p=problems: p.append(f"failed {r.url}"))
                page.on("response", lambda r, p=problems: r.status >= 400 and p.append(
                    f"{r.status} {r.url}"))
                page.goto(f"{url}?view={view}")
                try:  # metrics.js runs once every module of its graph has loaded and run
                    page.wait_for_selector("#controls > *", timeout=20_000)
                    page.wait_for_function("() => !!window.Plotly")  # the preloaded plotly
                except PlaywrightTimeout:
                    pytest.fail(f"the {view} view's modules did not run: {problems}")
                loaded = set(page.evaluate(
                    "() => performance.getEntriesByType('resource').map(e => "
                    "new URL(e.name).pathname)"))
                assert preloads <= loaded
                assert not problems, (view, problems)
                page.context.close()
        finally:
            browser.close()
