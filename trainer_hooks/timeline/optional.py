"""Optional dependencies, imported when first used."""

from __future__ import annotations

import importlib
from typing import Any


def require(module: str, extra: str, what: str, package: str | None = None) -> Any:
    """`module` imported, or an ImportError that names the extra (and the package) that
    installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = package or module
        raise ImportError(f"{what} needs {package}: pip install "
                          f"'telescope-trainer-hooks[{extra}]' (or pip install {package})") from exc
