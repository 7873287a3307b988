"""The wheel's build step (pyproject.toml: `[tool.setuptools] cmdclass`): SortableJS, installed
by `npm ci` from package.json into node_modules/, goes into the package as
telescope_ui/vendor/sortablejs/ (its ES module and licence), where `telescope_ui.assets` finds
it in an install. An editable install reads node_modules/ of the checkout instead. Used only
by setuptools, never at run time. The trainer client (clients/python, its own distribution)
has no such step: a training machine needs no Node."""

from __future__ import annotations

from pathlib import Path

from setuptools.command.build_py import build_py  # type: ignore[import-untyped]
from setuptools.errors import SetupError  # type: ignore[import-untyped]

CHECKOUT = Path(__file__).resolve().parent.parent
SORTABLE = CHECKOUT / "node_modules" / "sortablejs"
FILES = {SORTABLE / "modular" / "sortable.esm.js": "sortable.esm.js",
         SORTABLE / "LICENSE": "LICENSE"}


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        missing = [str(source) for source in FILES if not source.is_file()]
        if missing:
            raise SetupError(
                f"SortableJS is missing ({', '.join(missing)}): the server's wheel "
                "(telescope-dashboard) ships it from node_modules/, so run `npm ci` (Node 20, "
                "package.json) in the checkout before building it. The trainer client alone "
                "needs no Node: pip install ./clients/python")
        target = Path(self.build_lib) / "telescope_ui" / "vendor" / "sortablejs"
        target.mkdir(parents=True, exist_ok=True)
        for source, name in FILES.items():
            self.copy_file(str(source), str(target / name))
