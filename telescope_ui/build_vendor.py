"""The wheel's build step (pyproject.toml: `[tool.setuptools] cmdclass`): SortableJS and
Plotly's cartesian bundle, installed by `npm ci` from package.json into node_modules/, go into
the package as telescope_ui/vendor/sortablejs/ (its ES module and licence) and
telescope_ui/vendor/plotly/ (plotly.min.js and its licence), where `telescope_ui.assets` finds
them in an install. An editable install reads node_modules/ of the checkout instead. Used only
by setuptools, never at run time. The trainer client (clients/python, its own distribution)
has no such step: a training machine needs no Node."""

from __future__ import annotations

from pathlib import Path

from setuptools.command.build_py import build_py  # type: ignore[import-untyped]
from setuptools.errors import SetupError  # type: ignore[import-untyped]

CHECKOUT = Path(__file__).resolve().parent.parent
SORTABLE = CHECKOUT / "node_modules" / "sortablejs"
PLOTLY = CHECKOUT / "node_modules" / "plotly.js-cartesian-dist-min"
FILES = {SORTABLE / "modular" / "sortable.esm.js": "sortablejs/sortable.esm.js",
         SORTABLE / "LICENSE": "sortablejs/LICENSE",
         PLOTLY / "plotly-cartesian.min.js": "plotly/plotly.min.js",
         PLOTLY / "LICENSE": "plotly/LICENSE"}


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        missing = [str(source) for source in FILES if not source.is_file()]
        if missing:
            raise SetupError(
                f"SortableJS or Plotly is missing ({', '.join(missing)}): the server's wheel "
                "(telescope-dashboard) ships them from node_modules/, so run `npm ci` (Node 20, "
                "package.json) in the checkout before building it. The trainer client alone "
                "needs no Node: pip install ./clients/python")
        vendor = Path(self.build_lib) / "telescope_ui" / "vendor"
        for source, name in FILES.items():
            (vendor / name).parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(source), str(vendor / name))
