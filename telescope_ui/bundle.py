"""What esbuild (npm, package.json) makes for `collectstatic` (docs/architecture.md#static-
files): plotly.min.js from Plotly's sources (`plotly_file`, below), and the Metrics page's
modules as one bundle: static/js/metrics.js and everything it imports into `js/bundle/
metrics.js`, and the Custom view (`custom/view.js`, which metrics.js loads with `import()` for
that view alone; SortableJS inside it) into `js/bundle/custom/view.js`, their shared code in
`js/bundle/chunk-*.js`. `collectstatic` collects them like any static file (`BundleFinder`:
hashed names, the imports between them rewritten, compressed); the source modules are still
collected, for the other pages and for reading.

Why: the page's 37 modules took a cold load ~0.3-0.5 s to arrive over HTTP/1.1's six
connections, preloaded or not, before metrics.js could run (bench/RESULTS.md, 2026-12-03).

No syntax is changed (no minification or down-levelling: what runs is the sources' code, one
module after another; gzip and brotli do the shrinking) and each output line of an import stays
a line of its own (`telescope_ui.assets.StaticStorage` rewrites imports line by line).

Built once per set of inputs (the sources, esbuild's version, these options) into a directory
named by their digest under the system's temporary directory, so the processes of one machine
share it. Where esbuild is not installed (a wheel: no node_modules), the bundle its build step
made (`telescope_ui.build_vendor`) is used; with neither, collecting refuses, naming `npm ci`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Entry points, relative to static/js; their outputs keep these names under js/bundle/.
ENTRIES = ("metrics.js", "custom/view.js")
PREFIX = "js/bundle"
OPTIONS = ("--bundle", "--format=esm", "--splitting", "--chunk-names=chunk-[hash]",
           "--charset=utf8", "--log-level=warning")
# Where a wheel carries the bundle its build made (telescope_ui/build_vendor.py).
PACKAGED = Path(__file__).resolve().parent / "vendor" / "bundle"


def esbuild(node_modules: Path) -> Path | None:
    """esbuild's executable in `node_modules` (`npm ci`), or None."""
    exe = node_modules / "esbuild" / "bin" / "esbuild"
    return exe if exe.is_file() else None


def build(js_dir: Path, vendor: dict[str, Path], exe: Path, out: Path) -> None:
    """Bundle ENTRIES of `js_dir` (static/js) into `out` (emptied first). `vendor`: static name
    (`vendor/…`) → file, for the modules that import npm's files by their static URL
    (`'../../vendor/sortablejs/sortable.esm.js'`): the sources are laid out as they are served,
    in a scratch directory beside `out`, so every relative import resolves as in the browser
    (its working directory: the comments naming each module's source, `// js/core/api.js`,
    are the same wherever it is built, and so is the bundle)."""
    root = out.with_name("bundle-src")
    for stale in (root, out):
        if stale.exists():
            shutil.rmtree(stale)
    try:
        shutil.copytree(js_dir, root / "js")
        for name, source in vendor.items():
            if name.endswith(".js"):
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, root / name)
        result = subprocess.run(
            [str(exe.resolve()), *[f"js/{e}" for e in ENTRIES], *OPTIONS,
             f"--outdir={out.resolve()}", "--outbase=js"],
            cwd=root, capture_output=True, text=True, timeout=120)
        if result.returncode:
            raise RuntimeError(f"esbuild failed: {result.stderr.strip()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@functools.cache
def _version(exe: Path, mtime_ns: int) -> str:
    """esbuild's version (asked once per executable and its modification time)."""
    return subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60,
                          check=True).stdout


def _digest(js_dir: Path, vendor: dict[str, Path], exe: Path) -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(_version(exe, exe.stat().st_mtime_ns).encode())
    for path in sorted(js_dir.rglob("*.js")):
        digest.update(f"{path.relative_to(js_dir)}\n".encode() + path.read_bytes())
    for name, source in sorted(vendor.items()):
        if name.endswith(".js"):
            digest.update(f"{name}\n".encode() + source.read_bytes())
    return digest.hexdigest()[:20]


def bundle_dir(js_dir: Path, vendor: dict[str, Path], node_modules: Path) -> Path:
    """The directory holding the bundle of `js_dir`'s current sources: built with
    `node_modules`' esbuild (once per inputs, shared), else the wheel's (PACKAGED)."""
    exe = esbuild(node_modules)
    if exe is None:
        if (PACKAGED / ENTRIES[0]).is_file():
            return PACKAGED
        from telescope_ui.assets import VendorMissing

        raise VendorMissing(f"esbuild (the Metrics page's bundle needs it) is missing: run "
                            f"`npm ci` in the checkout (`make run` does); looked in "
                            f"{node_modules / 'esbuild'}")
    key = _digest(js_dir, vendor, exe)
    final = Path(tempfile.gettempdir()) / f"telescope-bundle-{key}"
    if not (final / ENTRIES[0]).is_file():
        staging = Path(tempfile.mkdtemp(prefix=f"telescope-bundle-{key}-"))
        build(js_dir, vendor, exe, staging / "bundle")
        try:
            os.rename(staging / "bundle", final)
        except OSError:  # another process got there first: same inputs, same bundle
            pass
        shutil.rmtree(staging, ignore_errors=True)
    return final


# Plotly, built from its sources (npm: plotly.js) with the traces the pages draw: scatter (in
# Plotly's core) and heatmap (the distribution heatmap, state strips). The cartesian bundle's
# other traces and its calendars took a cold load's evaluation of plotly.min.js from ~220 ms to
# ~600 ms here (bench/RESULTS.md, 2026-12-03). As Plotly builds its own dists (its
# esbuild-config.js: an IIFE defining `Plotly`, `global` as `window`, es2016), minified.
PLOTLY_TRACES = ("heatmap",)
PLOTLY_OPTIONS = ("--bundle", "--format=iife", "--global-name=Plotly", "--define:global=window",
                  "--define:define.amd=false", "--target=es2016", "--minify", "--charset=utf8",
                  "--log-level=warning")  # legal comments kept (at the end: esbuild's default)


def plotly_source(node_modules: Path) -> Path | None:
    """Plotly's sources in `node_modules` (`npm ci`), or None."""
    source = node_modules / "plotly.js"
    return source if (source / "lib" / "core.js").is_file() else None


def build_plotly(source: Path, exe: Path, out: Path) -> None:
    """plotly.min.js of Plotly's core and PLOTLY_TRACES into the file `out`."""
    version = json.loads((source / "package.json").read_text())["version"]
    entry = out.with_name(out.name + ".entry.js")
    lib = source.resolve() / "lib"
    entry.write_text(
        f"var Plotly = require({json.dumps(str(lib / 'core.js'))});\n"
        "Plotly.register(["
        + ", ".join(f"require({json.dumps(str(lib / f'{t}.js'))})" for t in PLOTLY_TRACES)
        + "]);\nmodule.exports = Plotly;\n")
    banner = (f"/**\n* plotly.js v{version} (core, {', '.join(PLOTLY_TRACES)} - minified)\n"
              "* Copyright 2012-2025, Plotly, Inc.\n* All rights reserved.\n"
              "* Licensed under the MIT license\n*/")
    try:
        result = subprocess.run(
            [str(exe.resolve()), str(entry.resolve()), *PLOTLY_OPTIONS,
             f"--outfile={out.resolve()}", f"--banner:js={banner}"],
            cwd=out.parent, capture_output=True, text=True, timeout=300)
        if result.returncode:
            raise RuntimeError(f"esbuild failed on Plotly: {result.stderr.strip()}")
    finally:
        entry.unlink(missing_ok=True)


def plotly_file(node_modules: Path) -> Path | None:
    """plotly.min.js built from `node_modules`' plotly.js (once per installed versions, esbuild
    and these options, shared like the bundle), or None without plotly.js or esbuild."""
    exe, source = esbuild(node_modules), plotly_source(node_modules)
    if exe is None or source is None:
        return None
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update((source / "package.json").read_bytes())
    installed = node_modules / ".package-lock.json"  # npm's record of what it installed: the
    if installed.is_file():  # versions of Plotly's dependencies too
        digest.update(installed.read_bytes())
    digest.update(_version(exe, exe.stat().st_mtime_ns).encode())
    final = Path(tempfile.gettempdir()) / f"telescope-plotly-{digest.hexdigest()[:20]}.min.js"
    if not final.is_file():
        staging = Path(tempfile.mkdtemp(prefix="telescope-plotly-"))
        build_plotly(source, exe, staging / "plotly.min.js")
        os.replace(staging / "plotly.min.js", final)
        shutil.rmtree(staging, ignore_errors=True)
    return final


def files(directory: Path) -> Iterator[tuple[str, Path]]:
    """(static name under PREFIX, file) for each file of a bundle directory."""
    for path in sorted(directory.rglob("*.js")):
        yield f"{PREFIX}/{path.relative_to(directory).as_posix()}", path
