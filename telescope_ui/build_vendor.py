"""The wheel's build step (pyproject.toml: `[tool.setuptools] cmdclass`): SortableJS and
Plotly's cartesian bundle, installed by `npm ci` from package.json into node_modules/, go into
the package as telescope_ui/vendor/sortablejs/ (its ES module and licence) and
telescope_ui/vendor/plotly/ (plotly.min.js and its licence), where `telescope_ui.assets` finds
them in an install; and the Metrics page's bundle, made with esbuild (telescope_ui/bundle.py),
as telescope_ui/vendor/bundle/. An editable install reads node_modules/ of the checkout
instead. Used only by setuptools, never at run time. The sdist carries the same files at the
same paths (the bundle made), so a wheel built from it needs no Node. The trainer client
(clients/python, its own distribution) has no such step: a training machine needs no Node."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.command.build_py import build_py  # type: ignore[import-untyped]
from setuptools.command.sdist import sdist  # type: ignore[import-untyped]
from setuptools.errors import SetupError  # type: ignore[import-untyped]

CHECKOUT = Path(__file__).resolve().parent.parent
SORTABLE = CHECKOUT / "node_modules" / "sortablejs"
PLOTLY = CHECKOUT / "node_modules" / "plotly.js-cartesian-dist-min"
FILES = {SORTABLE / "modular" / "sortable.esm.js": "sortablejs/sortable.esm.js",
         SORTABLE / "LICENSE": "sortablejs/LICENSE",
         PLOTLY / "plotly-cartesian.min.js": "plotly/plotly.min.js",
         PLOTLY / "LICENSE": "plotly/LICENSE"}


def require_files(what: str) -> None:
    missing = [str(source) for source in FILES if not source.is_file()]
    if missing:
        raise SetupError(
            f"SortableJS or Plotly is missing ({', '.join(missing)}): the server's {what} "
            "(telescope-dashboard) ships them from node_modules/, so run `npm ci` (Node 20, "
            "package.json) in the checkout before building it. The trainer client alone "
            "needs no Node: pip install ./clients/python")


# The Metrics page's bundle (telescope_ui/bundle.py), made with esbuild from node_modules/ in a
# checkout; an sdist carries it made, at this path (a wheel built from it needs no Node).
PACKAGED_BUNDLE = CHECKOUT / "telescope_ui" / "vendor" / "bundle"


def make_bundle(out: Path, what: str) -> None:
    """The bundle into `out`: built from static/js, or copied from an sdist's."""
    from telescope_ui import bundle

    exe = bundle.esbuild(CHECKOUT / "node_modules")
    if exe is not None:
        vendor = {f"vendor/{name}": source for source, name in FILES.items()}
        bundle.build(CHECKOUT / "static" / "js", vendor, exe, out)
    elif (PACKAGED_BUNDLE / bundle.ENTRIES[0]).is_file() and PACKAGED_BUNDLE != out:
        shutil.copytree(PACKAGED_BUNDLE, out, dirs_exist_ok=True)
    else:
        raise SetupError(f"esbuild is missing (node_modules/esbuild): the server's {what} ships "
                         "the Metrics page's bundle, so run `npm ci` (Node 20, package.json) in "
                         "the checkout before building it")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        require_files("wheel")
        vendor = Path(self.build_lib) / "telescope_ui" / "vendor"
        for source, name in FILES.items():
            (vendor / name).parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(source), str(vendor / name))
        make_bundle(vendor / "bundle", "wheel")


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        require_files("sdist")
        for source in FILES:  # where BuildPy looks for them in the unpacked sdist
            target = Path(base_dir) / source.relative_to(CHECKOUT)
            self.mkpath(str(target.parent))
            self.copy_file(str(source), str(target))
        make_bundle(Path(base_dir) / PACKAGED_BUNDLE.relative_to(CHECKOUT), "sdist")
