"""ingest/ keeps its sides apart (docs/architecture.md "Layers"): every import of every module
under ingest/ is read (ast, imports inside functions too), and

- `core` (ingest/core/ and ingest/models.py) imports no sibling side;
- `reads` never imports `write` or `pipeline`;
- `write` reaches the pipeline only through `ingest.pipeline.kick`;
- `pipeline` never imports `write` (its outcomes go through core's commit and broadcast).

Synthetic modules that break each rule show the check fails when it should."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INGEST = ROOT / "ingest"
SIDES = ("core", "write", "pipeline", "reads")
KICK = "ingest.pipeline.kick"
# What each side may not import (the sides' arrows; kick is write's one way in).
FORBIDDEN = {
    "core": {"write", "pipeline", "reads"},
    "reads": {"write", "pipeline"},
    "write": {"pipeline"},
    "pipeline": {"write"},
}
# Modules of ingest/ that belong to no side: the Django app's own files and its edges.
OUTSIDE = ("ingest.apps", "ingest.importers", "ingest.management", "ingest.migrations")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imports(source: str, name: str, package: bool = False) -> set[str]:
    """The ingest modules that the code of module `name` imports (`from a import b`: a.b when
    b is a module, else a)."""
    here = name if package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:  # a module named is imported; a name, from `base`
                found.add(f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base)
    return {m for m in found if m == "ingest" or m.startswith("ingest.")}


def side(module: str) -> str | None:
    if module == "ingest.models":
        return "core"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SIDES else None


def violations(name: str, imported: set[str]) -> list[str]:
    """What breaks the arrows in module `name` importing `imported`."""
    own = side(name)
    bad = []
    for target in sorted(imported):
        other = side(target)
        if own is None or other is None or other == own:
            continue
        if other in FORBIDDEN[own] and not (own == "write" and target == KICK):
            bad.append(f"{name} ({own}) imports {target} ({other})")
    return bad


def ingest_modules() -> list[Path]:
    return sorted(p for p in INGEST.rglob("*.py") if "migrations" not in p.parts)


def test_every_module_of_ingest_keeps_the_arrows() -> None:
    bad = []
    for path in ingest_modules():
        name = module_name(path)
        bad += violations(name, imports(path.read_text(encoding="utf-8"), name,
                                        package=path.name == "__init__.py"))
    assert not bad, "\n".join(bad)


def test_every_module_of_ingest_is_on_a_side() -> None:
    """No flat module is left beside the sides (but the Django app's models and apps)."""
    loose = [module_name(p) for p in ingest_modules()
             if side(module_name(p)) is None and module_name(p) != "ingest"
             and not module_name(p).startswith(OUTSIDE)]
    assert not loose, loose


def test_the_write_side_does_kick_the_pipeline() -> None:
    """The one interface is used (so the exception for it is not what lets everything pass)."""
    users = [module_name(p) for p in (INGEST / "write").rglob("*.py")
             if KICK in imports(p.read_text(encoding="utf-8"), module_name(p))]
    assert sorted(users) == ["ingest.write.consumers", "ingest.write.views"]


@pytest.mark.parametrize(("name", "source", "target"), [
    ("ingest.core.fake", "from ingest.write.store import apply_message", "ingest.write.store"),
    ("ingest.core.fake", "from ingest.reads import catalog", "ingest.reads.catalog"),
    ("ingest.core.fake", "def f():\n    from ingest.pipeline import gini", "ingest.pipeline.gini"),
    ("ingest.models", "import ingest.write.runs", "ingest.write.runs"),
    ("ingest.reads.fake", "from ingest.write import auth", "ingest.write.auth"),
    ("ingest.reads.fake", "from ..pipeline.materialize import behind",
     "ingest.pipeline.materialize"),
    ("ingest.write.fake", "from ingest.pipeline.materialize import MATERIALIZER",
     "ingest.pipeline.materialize"),
    ("ingest.write.fake", "from ingest import pipeline", "ingest.pipeline"),
    ("ingest.pipeline.fake", "from ingest.write.store import apply_message", "ingest.write.store"),
])
def test_a_broken_arrow_is_reported(name: str, source: str, target: str) -> None:
    bad = violations(name, imports(source, name))
    assert len(bad) == 1 and target in bad[0], bad


@pytest.mark.parametrize(("name", "source"), [
    ("ingest.core.fake", "from ingest.models import Run\nfrom ingest.core import pointstore"),
    ("ingest.reads.fake", "from ingest.core.columns import decode_batch\nfrom . import downsample"),
    ("ingest.write.fake", "from ingest.pipeline.kick import kick\nfrom ingest.core import commit"),
    ("ingest.write.fake", "from ingest.pipeline import kick"),
    ("ingest.pipeline.fake", "from ingest.reads.catalog import pending_steps"),
    ("telescope_ui.fake", "from ingest.write import store\nfrom ingest.pipeline import worker"),
])
def test_an_allowed_import_is_not_reported(name: str, source: str) -> None:
    assert violations(name, imports(source, name)) == []
