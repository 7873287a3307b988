"""The client's build hook (pyproject.toml: `[tool.hatch.build.hooks.custom]`): trainer_hooks/
goes into the wheel and the sdist from where it lives. In a checkout that is two folders up
(the server imports the same files); in an unpacked sdist it is beside this file, where the
sdist put it. An editable wheel gets nothing (its .pth names the checkout). Build time only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "trainer_hooks"


class TrainerHooksSource(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "editable":
            return
        here = Path(self.root)
        for source in (here / PACKAGE, here.parent.parent / PACKAGE):
            if (source / "__init__.py").is_file():
                build_data["force_include"][str(source)] = PACKAGE
                return
        raise FileNotFoundError(f"{PACKAGE}/ is neither in {here} (an sdist) nor two folders "
                                f"up (a checkout of the repository)")
