"""The wheel's build step (pyproject.toml: `[tool.setuptools] cmdclass`): SortableJS and
Plotly, installed by `npm ci` from package.json into node_modules/, go into the package as
telescope_ui/vendor/sortablejs/ (its ES module and licence) and telescope_ui/vendor/plotly/
(plotly.min.js, built from Plotly's sources with esbuild: telescope_ui/bundle.py, and its
licence), where `telescope_ui.assets` finds them in an install; and the Metrics page's bundle,
made with esbuild too, as telescope_ui/vendor/bundle/. An editable install reads
node_modules/ of the checkout instead. Used only by setuptools, never at run time. The sdist
carries the same files at the same paths (and what esbuild made), so a wheel built from it
needs no Node. The trainer client (clients/python, its own distribution) has no such step: a
training machine needs no Node."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.command.build_py import build_py  # type: ignore[import-untyped]
from setuptools.command.sdist import sdist  # type: ignore[import-untyped]
from setuptools.errors import SetupError  # type: ignore[import-untyped]

CHECKOUT = Path(__file__).resolve().parent.parent
SORTABLE = CHECKOUT / "node_modules" / "sortablejs"
PLOTLY = CHECKOUT / "node_modules" / "plotly.js"
FILES = {SORTABLE / "modular" / "sortable.esm.js": "sortablejs/sortable.esm.js",
         SORTABLE / "LICENSE": "sortablejs/LICENSE",
         PLOTLY / "LICENSE": "plotly/LICENSE"}


def require_files(what: str) -> None:
    missing = [str(source) for source in FILES if not source.is_file()]
    if missing:
        raise SetupError(
            f"SortableJS or Plotly is missing ({', '.join(missing)}): the server's {what} "
            "(telescope-dashboard) ships them from node_modules/, so run `npm ci` (Node 20, "
            "package.json) in the checkout before building it. The trainer client alone "
            "needs no Node: pip install ./clients/python")


# What esbuild makes (telescope_ui/bundle.py) from node_modules/ in a checkout: the Metrics
# page's bundle and Plotly (its core and heatmap, from its sources). An sdist carries them
# made, at these paths under telescope_ui/vendor/ (a wheel built from it needs no Node).
PACKAGED = CHECKOUT / "telescope_ui" / "vendor"
MADE = ("bundle", "plotly/plotly.min.js")


def make_built(vendor: Path, what: str) -> None:
    """The bundle and plotly.min.js into `vendor` (a package's telescope_ui/vendor/): built with
    esbuild, or copied from an sdist's."""
    from telescope_ui import bundle

    modules = CHECKOUT / "node_modules"
    exe, plotly = bundle.esbuild(modules), bundle.plotly_source(modules)
    if exe is not None and plotly is not None:
        sources = {f"vendor/{name}": source for source, name in FILES.items()}
        bundle.build(CHECKOUT / "static" / "js", sources, exe, vendor / "bundle")
        (vendor / "plotly").mkdir(parents=True, exist_ok=True)
        bundle.build_plotly(plotly, exe, vendor / "plotly" / "plotly.min.js")
    elif vendor != PACKAGED and all((PACKAGED / name).exists() for name in MADE):
        shutil.copytree(PACKAGED / "bundle", vendor / "bundle", dirs_exist_ok=True)
        (vendor / "plotly").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGED / "plotly" / "plotly.min.js", vendor / "plotly" / "plotly.min.js")
    else:
        raise SetupError(f"esbuild or Plotly's sources are missing (node_modules/esbuild, "
                         f"node_modules/plotly.js): the server's {what} ships the Metrics page's "
                         "bundle and Plotly built with them, so run `npm ci` (Node 20, "
                         "package.json) in the checkout before building it")


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
        make_built(vendor, "wheel")


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        require_files("sdist")
        for source in FILES:  # where BuildPy looks for them in the unpacked sdist
            target = Path(base_dir) / source.relative_to(CHECKOUT)
            self.mkpath(str(target.parent))
            self.copy_file(str(source), str(target))
        make_built(Path(base_dir) / PACKAGED.relative_to(CHECKOUT), "sdist")
