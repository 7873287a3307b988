"""docs/protocol.md is kept true: everything the code exposes to the outside is named there (or,
for server settings, in docs/operations.md). Each check reads its list from the code — the wire
schema's message types and limits, the URL patterns, the close codes, the error codes raised,
the settings read, the commands — so a new one that is not documented fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    """The part of a Markdown document under the heading `title` (any level), up to the next
    heading of the same or a higher level."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+) (.*)", line)
        if m and m.group(2).strip() == title:
            level = len(m.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (h := re.match(r"(#+) ", lines[j])) and len(h.group(1)) <= level),
                       len(lines))
            return "\n".join(lines[i + 1:end])
    raise AssertionError(f"docs: no heading {title!r}")


def table_keys(text: str, column: int = 0) -> set[str]:
    """The backticked names in a column (the first by default) of the Markdown tables of
    `text` (a cell may name several: `a`, `b`)."""
    keys: set[str] = set()
    for line in text.splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > column + 1:
            keys.update(re.findall(r"`([^`]+)`", cells[column + 1]))
    return keys


def missing(names: set[str], found: set[str]) -> list[str]:
    return sorted(n for n in names if n not in found)


@pytest.fixture(scope="module")
def protocol() -> str:
    return read("protocol.md")


# ---------------------------------------------------------------- the wire


def test_every_message_type(protocol: str) -> None:
    from trainer_hooks.wire.schema import MESSAGE_TYPES

    assert MESSAGE_TYPES
    assert missing(set(MESSAGE_TYPES), table_keys(section(protocol, "Messages"))) == []


def raised_codes(*packages: str) -> set[str]:
    """The code (first argument, a string literal) of every `ProtocolError(...)` made in the
    packages' source."""
    codes: set[str] = set()
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                first = node.args[0]
                if name == "ProtocolError" and isinstance(first, ast.Constant) \
                        and isinstance(first.value, str):
                    codes.add(first.value)
    return codes


def test_every_error_code(protocol: str) -> None:
    codes = raised_codes("trainer_hooks/wire", "ingest", "telescope_ui")
    assert {"bad_frame", "unknown_type", "timeout"} <= codes  # the scan itself works
    assert missing(codes, table_keys(section(protocol, "Replies"))) == []


def close_codes(module: ModuleType) -> dict[str, int]:
    return {name: value for name, value in vars(module).items()
            if name.startswith("CLOSE_") and isinstance(value, int)}


def test_every_close_code(protocol: str) -> None:
    from ingest.write import consumers
    from telescope_ui import live

    codes = close_codes(consumers) | close_codes(live)
    assert "CLOSE_BAD_TOKEN" in codes and "CLOSE_FORBIDDEN" in codes
    documented = {line.split("|")[1].strip() for line in
                  section(protocol, "Close codes").splitlines() if line.startswith("|")}
    assert missing({str(code) for code in codes.values()}, documented) == []


def test_every_wire_limit(protocol: str) -> None:
    from trainer_hooks.wire import schema

    limits = {name for name in vars(schema) if re.fullmatch(r"(DEFAULT_)?MAX_[A-Z_]+", name)}
    assert "MAX_SAMPLES_PER_MESSAGE" in limits
    assert missing(limits, table_keys(section(protocol, "Limits"))) == []


# ---------------------------------------------------------------- HTTP and WebSocket routes


def routes() -> set[str]:
    """Every route of telescope_ui.urls as the docs write it: `/api/runs/<id>/catalog`."""
    from django.urls import URLPattern, URLResolver, get_resolver

    out: set[str] = set()

    def walk(patterns: list, prefix: str) -> None:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, route)
            elif isinstance(p, URLPattern):
                out.add("/" + re.sub(r"<(?:\w+:)?\w+>", "<id>", route))

    walk(get_resolver("telescope_ui.urls").url_patterns, "")
    return out


def test_every_url_pattern(protocol: str) -> None:
    found = routes()
    assert {"/", "/api/ingest", "/api/runs/<id>/series"} <= found
    table = table_keys(section(protocol, "HTTP endpoints"), column=1)  # | method | route |
    assert missing(found, table) == []


def test_every_websocket_route(protocol: str) -> None:
    source = (ROOT / "telescope_ui" / "asgi.py").read_text(encoding="utf-8")
    paths = set(re.findall(r"""path\(\s*["']([^"']+)["']""", source))
    assert {"ws/ingest/", "ws/live/"} <= paths
    assert sorted(p for p in paths if f"/{p}`" not in protocol) == []  # a code span ends so


def test_every_live_message(protocol: str) -> None:
    """Every `type` the live socket sends, and every request it takes."""
    source = (ROOT / "telescope_ui" / "live.py").read_text(encoding="utf-8")
    sent = set(re.findall(r'"type": "(\w+)"', source.split('"""', 2)[2]))  # code, not docstring
    taken = set(re.findall(r'kind == "(\w+)"', source))
    assert {"delta", "reset"} <= sent and "subscribe" in taken
    live = section(protocol, "Live updates: `/ws/live/`")
    documented = set(re.findall(r'"type": "(\w+)"', live))
    assert missing(sent | taken, documented) == []


# ---------------------------------------------------------------- settings and commands


def _is_environ(node: ast.AST) -> bool:
    """`os.environ` (or a bare `environ`)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") \
        or (isinstance(node, ast.Name) and node.id == "environ")


def env_reads(path: Path) -> set[str]:
    """The variable names a module reads from the environment: `os.environ.get("X")`,
    `os.environ["X"]` (read, not assigned), `os.getenv("X")`, and in settings.py its env
    helpers (`envbool("X", ...)`, `envint`, `envlist`, `envnetworks`: any `env*` function)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        key: ast.AST | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value):
                key = node.args[0]
            elif isinstance(func, ast.Attribute) and func.attr == "getenv":
                key = node.args[0]
            elif isinstance(func, ast.Name) and re.fullmatch(r"env[a-z_]*", func.id):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and _is_environ(node.value):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
    return names


def settings_read() -> set[str]:
    """Every environment variable the shipped code reads: the server (telescope_ui, ingest) and
    the trainer's library (trainer_hooks)."""
    names: set[str] = set()
    for package in ("telescope_ui", "ingest", "trainer_hooks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            names |= env_reads(path)
    return names


def test_every_setting() -> None:
    """Every variable the code reads from the environment — settings.py's env helpers and
    os.environ reads anywhere in telescope_ui/, ingest/ and trainer_hooks/ — and every
    TELESCOPE_* setting settings.py defines has a row in a table of docs/operations.md."""
    from django.conf import settings

    names = settings_read()
    names |= {n for n in dir(settings) if n.startswith("TELESCOPE_")}
    # the scan itself works: helpers, os.environ.get, both sides
    assert {"TELESCOPE_MAX_MESSAGE_BYTES", "LOG_LEVEL", "CSRF_TRUSTED_ORIGINS", "DATABASE_URL",
            "TELESCOPE_SPOOL_DIR", "TELESCOPE_URL"} <= names
    assert missing(names, table_keys(read("operations.md"))) == []


def test_env_scan_finds_every_kind_of_read(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('import os\nfrom os import environ\n'
                      'a = os.environ.get("A")\nb = os.environ["B"]\nc = os.getenv("C")\n'
                      'd = envint("D", 1)\ne = environ.get("E", "")\n'
                      'os.environ["SET"] = "1"\nf = envlist(name, [])\n', encoding="utf-8")
    assert env_reads(module) == {"A", "B", "C", "D", "E"}


def test_every_command(protocol: str) -> None:
    """The project's manage.py commands and the `telescope` command's subcommands."""
    from django.core.management import get_commands

    commands = {name for name, app in get_commands().items()
                if app in ("ingest", "telescope_ui")}
    assert {"createtoken", "declare_ranges", "demo"} <= commands
    docs = protocol + read("operations.md")
    assert missing(commands, set(re.findall(r"manage\.py (\w+)", docs))) == []
    cli = (ROOT / "telescope_ui" / "cli.py").read_text(encoding="utf-8")
    subcommands = set(re.findall(r"""add_parser\(\s*["'](\w+)["']""", cli))
    assert "serve" in subcommands
    assert missing(subcommands, set(re.findall(r"`telescope (\w+)", protocol))) == []


# ---------------------------------------------------------------- the README


def test_readme_performance_is_current_figures_only() -> None:
    """The README's Performance section is one current row per benchmark (figure, target, date
    and commit), under a seventh of the README; the history lives in bench/RESULTS.md."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    perf = section(readme, "Performance")
    assert len(perf.encode()) < len(readme.encode()) / 7
    rows = [line for line in perf.splitlines() if line.startswith("| `bench/")]
    named = [re.match(r"\| `(bench/\w+\.py)", row).group(1) for row in rows]
    assert all((ROOT / name).exists() for name in named)
    assert all(re.search(r"\| 20\d\d-\d\d-\d\d [^|]+\|$", row) for row in rows)  # recorded
    scripts = {f"bench/{p.name}" for p in (ROOT / "bench").glob("*.py")
               if not p.read_text(encoding="utf-8").startswith('"""Benchmark entry point')}
    assert missing(scripts, set(named)) == []
    assert (ROOT / "bench" / "RESULTS.md").exists()


def test_no_development_diary_in_docs() -> None:
    """Dated notes of the development ("session 6", "this session") belong in bench/RESULTS.md."""
    diary = re.compile(r"\b(?:[Ss]ession \d+|this session|end of session)\b")
    found = [f"{doc.name}: {m.group(0)}" for doc in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
             for m in diary.finditer(doc.read_text(encoding="utf-8"))]
    assert found == []


def test_links_between_docs_resolve() -> None:
    """Relative links of the docs and the README name files that exist, and their anchors
    headings of those files."""
    def anchors(path: Path) -> set[str]:
        out = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            if m := re.match(r"#+ (.*)", line):
                slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
                out.add(slug)
        return out

    broken = []
    for doc in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            if not path.exists():
                broken.append(f"{doc.name}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{doc.name}: {target}")
    assert broken == []
