"""The wheel's build step (pyproject.toml: `[tool.setuptools] cmdclass`): SortableJS and
Plotly's cartesian bundle, installed by `npm ci` from package.json into node_modules/, go into
the package as telescope_ui/vendor/sortablejs/ (its ES module and licence) and
telescope_ui/vendor/plotly/ (plotly.min.js and its licence), where `telescope_ui.assets` finds
them in an install. An editable install reads node_modules/ of the checkout instead. Used only
by setuptools, never at run time. The sdist carries the same files at the same paths, so a
wheel built from it needs no Node. The trainer client (clients/python, its own distribution)
has no such step: a training machine needs no Node."""

from __future__ import annotations

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


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        require_files("sdist")
        for source in FILES:  # where BuildPy looks for them in the unpacked sdist
            target = Path(base_dir) / source.relative_to(CHECKOUT)
            self.mkpath(str(target.parent))
            self.copy_file(str(source), str(target))
