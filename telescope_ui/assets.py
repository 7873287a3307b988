"""The static pipeline (docs/architecture.md#static-files): what `collectstatic` gathers into
STATIC_ROOT, how it names and compresses it, and collecting again only when a source changed.

ServeStatic serves STATIC_ROOT in front of Django (`telescope_ui.asgi`); no Django view serves
a file. Sources: the front end's own files (static/), two vendor files exposed by
`VendorFinder` — Plotly, built from its sources with the traces the pages draw
(`telescope_ui.bundle`), and SortableJS's ES module (both from npm: node_modules/ in a
checkout, `npm ci`; inside the package in a wheel) — and the Metrics page's bundle
(`BundleFinder`). The setting
TELESCOPE_NODE_MODULES names another node_modules/ than the checkout's.

Only what reads the vendor files needs them: collecting the static files (`collectstatic`,
`telescope serve` and `python -m telescope_ui.serve`, which collect before serving) and finding
one (`findstatic`) refuse without them, naming `npm ci` (`VendorMissing`); Django's other
commands (`migrate`, `check`, `createsuperuser`, `declare_ranges`, ...) work in a checkout
without Node. No system check reports them: `migrate` runs every check.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder, get_finders
from django.core.files.storage import FileSystemStorage
from django.core.management.base import CommandError
from servestatic import ServeStaticASGI, compress
from servestatic.asgi import FileServerASGI
from servestatic.storage import CompressedManifestStaticFilesStorage
from servestatic.utils import decode_path_info

# Where a wheel carries the vendor files (copied in by its build: telescope_ui/build_vendor.py).
PACKAGE_VENDOR = Path(__file__).resolve().parent / "vendor"
SORTABLE = "sortablejs/sortable.esm.js"
# Plotly built from its sources with scatter and heatmap, the traces the pages draw
# (telescope_ui.bundle.build_plotly): 1.07 MB. Before it, the cartesian dist (1.3 MB: nine
# traces more, and calendars) and before that the full one the `plotly` Python package ships
# (4.8 MB): each one's evaluation was a large part of a cold Metrics page's first screen.
PLOTLY = "plotly/plotly.min.js"


class VendorMissing(CommandError):
    """A vendor file is not there. A CommandError: the management command that needed it
    (`collectstatic`, `findstatic`) ends with this one line, exit status 1, no traceback."""


def _vendor_file(what: str, candidates: tuple[Path, ...]) -> Path:
    found = next((path for path in candidates if path.is_file()), None)
    if found is None:
        raise VendorMissing(
            f"{what} is missing: run `npm ci` in the checkout (`make run` does); looked in "
            f"{', '.join(str(p) for p in candidates)}")
    return found


def vendor_files() -> dict[str, Path]:
    """Static name → source file of each vendor file (served under /static/vendor/…)."""
    from telescope_ui.bundle import plotly_file

    modules = Path(getattr(settings, "TELESCOPE_NODE_MODULES", settings.BASE_DIR / "node_modules"))
    plotly_js = PACKAGE_VENDOR / PLOTLY
    if not plotly_js.is_file():
        built = plotly_file(modules)
        if built is None:
            raise VendorMissing(
                "Plotly (every chart needs it) is missing: run `npm ci` in the checkout (`make "
                "run` does); it is built from Plotly's sources with esbuild, looked for in "
                f"{modules / 'plotly.js'}, {modules / 'esbuild'}")
        plotly_js = built
    sortable = _vendor_file("SortableJS (the Custom view needs it)", (
        PACKAGE_VENDOR / SORTABLE, modules / "sortablejs" / "modular" / "sortable.esm.js"))
    return {f"vendor/{PLOTLY}": plotly_js, f"vendor/{SORTABLE}": sortable}


class VendorFinder(BaseFinder):
    """Exactly the vendor files, each under its static name, for `collectstatic`. No
    `check()`: nothing to check until the files are read (see the module's docstring)."""

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        source = vendor_files().get(path) if path.startswith("vendor/") else None
        if find_all:
            return [str(source)] if source else []
        return str(source) if source else None

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        for name, source in vendor_files().items():
            storage = _VendorStorage(source, posixpath.basename(name))
            storage.prefix = posixpath.dirname(name)  # type: ignore[attr-defined]
            yield posixpath.basename(name), storage


def bundle_dir() -> Path:
    """The Metrics page's bundle of the current sources (telescope_ui.bundle)."""
    from telescope_ui import bundle

    modules = Path(getattr(settings, "TELESCOPE_NODE_MODULES", settings.BASE_DIR / "node_modules"))
    return bundle.bundle_dir(Path(settings.STATICFILES_DIRS[0]) / "js", vendor_files(), modules)


class BundleFinder(BaseFinder):
    """The Metrics page's bundle (telescope_ui.bundle), under js/bundle/, for `collectstatic`;
    built when first asked for (so, like the vendor files, only by what reads static files)."""

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        from telescope_ui.bundle import PREFIX

        found = None
        if path.startswith(PREFIX + "/"):
            source = bundle_dir() / path[len(PREFIX) + 1:]
            found = str(source) if source.is_file() else None
        if find_all:
            return [found] if found else []
        return found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        from telescope_ui.bundle import PREFIX, files

        directory = bundle_dir()
        storage = _BundleStorage(directory, PREFIX)
        for name, _path in files(directory):
            yield name, storage


class _BundleStorage(FileSystemStorage):
    """A bundle directory, its files under their static names (`js/bundle/…`, no prefix: the
    storage's import rewriting matches a file's name as its finder lists it)."""

    def __init__(self, directory: Path, prefix: str) -> None:
        super().__init__(location=directory)
        self.strip = prefix + "/"

    def path(self, name: str) -> str:
        return str(super().path(name.removeprefix(self.strip)))


class _VendorStorage(FileSystemStorage):
    """One vendor file's folder, the file under its static name (which may differ from the
    source's: Plotly's build, telescope-plotly-<digest>.min.js, is served as plotly.min.js)."""

    def __init__(self, source: Path, name: str) -> None:
        super().__init__(location=source.parent)
        self.alias = {name: source.name}

    def path(self, name: str) -> str:
        return str(super().path(self.alias.get(name, name)))


# Brotli's default (11) takes 16 s for plotly.min.js here, at every collection; 5 takes 0.3 s
# for a file 16% larger (1.24 MB, gzip -9: 1.42 MB), which on a dashboard's link is noise.
BROTLI_QUALITY = 5


class Compressor(compress.Compressor):
    @staticmethod
    def compress_brotli(data: bytes) -> bytes:
        return bytes(compress.brotli.compress(data, quality=BROTLI_QUALITY))


# A module specifier by relative URL, quoted: './x.js', "../vendor/y.js".
MODULE_URL = r"""["'](?P<url>\.{1,2}/[^"'\s]+)["']"""


class StaticStorage(CompressedManifestStaticFilesStorage):
    """ServeStatic's storage: content-hashed names (cached for good by browsers), gzip (and
    brotli, when the `brotli` module is installed) beside each file, only hashed files kept
    (SERVESTATIC_KEEP_ONLY_HASHED_FILES). ES modules import each other by relative path; those
    imports are rewritten to the hashed names, so a module graph is one consistent version."""

    support_js_module_import_aggregation = True
    # Django's own patterns for it match `import`/`export` anywhere, prose in comments included:
    # a comment saying "export it … and import one" above the imports ran into the first
    # `from './api.js'` as one `export … from` and failed the collection. These match
    # statements (at the start of a line: `import … from`, `export … from`, `import '…'`) and
    # `import('…')` calls, with relative URLs; and only the front end's own modules (scanning
    # plotly.min.js, 4.6 MB without an import, took seconds of every collection).
    _js_module_import_aggregation_patterns = ("js/*.js", (
        # import … from '…';  export … from '…';  (bindings may span lines)
        (r"(?m)^[ \t]*(?P<matched>(?P<head>(?:import|export)\s[\w$\s{},*]*?\sfrom\s*)"
         + MODULE_URL + ")", '%(head)s"%(url)s"'),
        # import '…';
        (r"(?m)^[ \t]*(?P<matched>(?P<head>import\s*)" + MODULE_URL + ")", '%(head)s"%(url)s"'),
        # import('…')
        (r"(?P<matched>(?P<head>\bimport\(\s*)" + MODULE_URL + ")", '%(head)s"%(url)s"'),
    ))
    # A module's hash covers its imports' hashed names: one pass per level of the import graph.
    max_post_process_passes = 20

    def create_compressor(self, **kwargs: Any) -> Compressor:
        return Compressor(**kwargs)

    def url(self, name: str | None, force: bool = False) -> str:
        # Hashed names under DEBUG too: only hashed files are collected.
        return str(super().url(name, force=True))


def fingerprint() -> str:
    """A digest of everything `collectstatic` output depends on: every source file's name and
    content, this module and the settings (the pipeline's rules), the versions doing the work."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(repr([settings.STATIC_URL, settings.STORAGES["staticfiles"],
                        settings.STATICFILES_FINDERS,
                        getattr(settings, "SERVESTATIC_KEEP_ONLY_HASHED_FILES", None)]).encode())
    for package in ("django", "servestatic", "brotli"):
        try:
            digest.update(f"{package} {importlib.metadata.version(package)}\n".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{package} -\n".encode())
    files = []
    for finder in get_finders():
        for path, storage in finder.list(["CVS", ".*", "*~"]):
            name = posixpath.join(getattr(storage, "prefix", None) or "", path)
            with storage.open(path) as source:
                files.append(f"{name} {hashlib.sha256(source.read()).hexdigest()}\n")
    for line in sorted(files):
        digest.update(line.encode())
    return digest.hexdigest()


def collect(verbosity: int = 0) -> bool:
    """Run `collectstatic` into STATIC_ROOT unless it already holds what the current sources
    make (a stamp beside it: `<STATIC_ROOT>.sources`). True when it collected. Processes
    starting at once on one data directory take turns (a lock file beside it)."""
    from django.core.management import call_command

    root = Path(settings.STATIC_ROOT)
    root.parent.mkdir(parents=True, exist_ok=True)
    stamp = root.with_name(root.name + ".sources")
    with open(root.with_name(root.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = fingerprint()
        if ((root / "staticfiles.json").is_file() and stamp.is_file()
                and stamp.read_text() == current):
            return False
        stamp.unlink(missing_ok=True)  # a collection cut short is redone next time
        call_command("collectstatic", interactive=False, clear=True, verbosity=verbosity)
        stamp.write_text(current)
        return True


# ServeStatic streams a file through `AsyncFile`: a thread pool of its own per request, 8 KiB
# per read, and (without the optional `sniffio`) a failed `import sniffio` on every read, which
# walks sys.path: 3.75 ms of server CPU per static request, and plotly.min.js in ~155 sends
# (80 ms per request). Daphne lacks the ASGI zero-copy extension ServeStatic prefers; offering
# it here and answering it by reading the file at once (at most 1.3 MB, from the page cache)
# skips all that.
ZEROCOPY = "http.response.zerocopysend"


class FileServer(FileServerASGI):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_file(message: dict[str, Any]) -> None:
            if message["type"] == ZEROCOPY:
                file = message["file"]
                file.seek(message.get("offset", 0))
                count = message.get("count")
                body = file.read() if count is None else file.read(count)
                message = {"type": "http.response.body", "body": body, "more_body": False}
            await send(message)

        extensions = {**(scope.get("extensions") or {}), ZEROCOPY: {}}
        await super().__call__({**scope, "extensions": extensions}, receive, send_file)


class StaticFilesASGI(ServeStaticASGI):
    """ServeStatic's ASGI app (files scanned once at start, no autorefresh) answering with
    `FileServer`."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        static_file = self.files.get(decode_path_info(scope["path"])) if (
            scope["type"] == "http") else None
        if static_file:
            await FileServer(static_file)(scope, receive, send)
        else:
            await self.application(scope, receive, send)


def static_app(app: Any) -> StaticFilesASGI:
    """`app` behind ServeStatic: the collected files in STATIC_ROOT (scanned once, now), each
    with its precompressed variants, hashed names cached for good (`immutable`); any other
    request goes on to `app` (an unknown name under /static/: Django's 404). No STATIC_ROOT yet
    (in-process tests that only use WebSockets): nothing to serve; `telescope_ui.serve`
    collects before it builds the app."""
    served = StaticFilesASGI(app)
    root = Path(settings.STATIC_ROOT)
    if root.is_dir():
        served.add_files(root, prefix=settings.STATIC_URL)
        served.files.pop(settings.STATIC_URL + "staticfiles.json", None)  # the manifest: ours
    return served
