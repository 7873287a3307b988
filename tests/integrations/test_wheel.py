"""The wheels a pip user installs: the server's (telescope-dashboard, pyproject.toml) and the
trainer client's (telescope-trainer-hooks, clients/python), built from the checkout, installed
in a fresh venv together (as the server's install has them), started with the server's
`telescope` console script, the client's `telescope-sync` beside it; the pages, the front
end's files, plotly.min.js and SortableJS must come from the installed package (collected into
the data directory under hashed names at `telescope serve`), not the checkout.

The fresh venv gets the two wheels alone (`--no-deps`); the server's other dependencies come
from this test's own venv through a .pth file (no download, and never torch). The wheels'
metadata is checked for them instead: the server must require them and the client at its own
version, and torch, transformers and trl only as the client's ranges."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.live_server import ROOT, free_port
from telescope_ui import bundle

SERVER_ROOTS = ("telescope_ui", "ingest")  # the server's wheel
CLIENT_ROOTS = ("trainer_hooks",)  # the client's wheel, and nothing else
DEV_ONLY = ("tests", "bench", "devtools")  # never in a wheel
SERVER_DEPS = {"django", "channels", "daphne", "numpy", "orjson", "msgpack",
               "pyyaml", "websockets", "servestatic", "tsdownsample", "dj-database-url",
               "zstandard", "telescope-trainer-hooks"}
CLIENT_DEPS = {"numpy", "orjson", "msgpack", "pyyaml", "websockets", "zstandard"}
TRAINING_STACK = {"torch", "transformers", "trl"}  # the user's own versions: ranges only


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a pip user: no checkout on the path, no test database or layer."""
    drop = {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL",
            "TELESCOPE_DATA_DIR", "TELESCOPE_TEST_DB"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def requirements(wheel: Path) -> list[str]:
    archive = zipfile.ZipFile(wheel)
    meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    return re.findall(r"^Requires-Dist: (.+)$", archive.read(meta).decode(), re.M)


def requirement_name(requirement: str) -> str:
    return re.split(r"[=<>!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def package_dirs(roots: tuple[str, ...]) -> set[str]:
    """The checkout's packages under `roots` (each folder with an __init__.py)."""
    return {p.parent.relative_to(ROOT).as_posix() for root in roots
            for p in (ROOT / root).rglob("__init__.py")}


@pytest.fixture(scope="module")
def client_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from the checkout itself, as a user would (hatchling, in pip's build isolation):
    hatchling writes nothing beside it."""
    return build_wheel(ROOT / "clients/python", tmp_path_factory.mktemp("client-dist"),
                       "telescope_trainer_hooks", "--no-deps")


@pytest.fixture(scope="module")
def server_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout to build the server from: setuptools leaves build/ where it
    builds, and a stale build/ would ship files the checkout no longer has."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    for folder in (*SERVER_ROOTS, *CLIENT_ROOTS, *DEV_ONLY, "static", "templates"):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # SortableJS, and Plotly's sources and esbuild for what the build step makes with them:
    # read where they are (Plotly's dependencies are ~200 packages).
    (src / "node_modules").symlink_to(ROOT / "node_modules")
    return src


def build_wheel(source: Path, out: Path, name: str, *options: str) -> Path:
    """The wheel of distribution `name` from `source`, a directory or an sdist."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), *options, "-q",
                            "-w", str(out)], timeout=300, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = out.glob(f"{name}-*.whl")
    return wheel


def build_server_wheel(source: Path, out: Path) -> Path:
    """The server's wheel, with this venv's setuptools."""
    return build_wheel(source, out, "telescope_dashboard", "--no-deps", "--no-build-isolation")


@pytest.fixture(scope="module")
def wheel(server_src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_server_wheel(server_src, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def venv(wheel: Path, client_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel), str(client_wheel)], check=True,
                   timeout=300,
                   capture_output=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True)
    (Path(site.stdout.strip()) / "_telescope_test_deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    return root


@pytest.fixture(scope="module")
def served(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data, port = tmp_path_factory.mktemp("data"), free_port()
    log = data / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(venv / "bin" / "telescope"), "serve", "--port", str(port),
                                 "--data-dir", str(data)], cwd=data, env=clean_env(),
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2).read()
                break
            except OSError:
                time.sleep(0.2)
        assert proc.poll() is None, log.read_text()[-3000:]
        yield url, data
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    assert f"Telescope dashboard on {url}/" in log.read_text()  # it said where it is


def fetch(url: str) -> tuple[int, bytes, str]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read(), response.headers.get("Content-Type", "")


def fetch_static(url: str) -> bytes:
    """A static file by its hashed name: JavaScript or CSS, cached for good."""
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        assert "immutable" in response.headers["Cache-Control"]
        assert re.search(r"(javascript|css)", response.headers["Content-Type"])
        body: bytes = response.read()
        return body


def entry_points(wheel: Path) -> str:
    archive = zipfile.ZipFile(wheel)
    return archive.read(next(n for n in archive.namelist()
                             if n.endswith(".dist-info/entry_points.txt"))).decode()


def console_scripts(wheel: Path) -> dict[str, str]:
    section = entry_points(wheel).split("[console_scripts]", 1)[1].split("\n[", 1)[0]
    return dict(line.replace(" ", "").split("=", 1) for line in section.splitlines()
                if "=" in line)


def test_the_wheel_holds_the_front_end_and_declares_its_script(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    checkout = {p.relative_to(ROOT / "static").as_posix() for p in (ROOT / "static").rglob("*")
                if p.is_file()}
    assert {f"telescope_ui/static/{n}" for n in checkout} <= names
    templates = {p.relative_to(ROOT / "templates").as_posix()
                 for p in (ROOT / "templates").rglob("*.html")}
    assert {f"telescope_ui/templates/{n}" for n in templates} <= names
    assert "telescope_ui/vendor/sortablejs/sortable.esm.js" in names  # the build step's copies
    assert "telescope_ui/vendor/plotly/plotly.min.js" in names
    assert "telescope_ui/vendor/bundle/metrics.js" in names  # what esbuild made
    missing = {p for p in package_dirs(SERVER_ROOTS) if f"{p}/__init__.py" not in names}
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
    assert not {n for n in names if n.split("/")[0] in DEV_ONLY}, "the wheel ships dev-only code"
    assert not {n for n in names if n.split("/")[0] in CLIENT_ROOTS}, "the client's, not ours"
    assert console_scripts(wheel) == {"telescope": "telescope_ui.cli:main"}


def test_the_client_wheel_declares_telescope_sync_and_no_script_of_the_servers(
        client_wheel: Path, wheel: Path) -> None:
    """A GPU node with the client alone has `telescope-sync`; installed beside the server,
    the two distributions never write one script file (a conflict for pip)."""
    assert console_scripts(client_wheel) == {"telescope-sync": "trainer_hooks.sync:main"}
    assert not set(console_scripts(client_wheel)) & set(console_scripts(wheel))


def test_the_client_wheel_holds_trainer_hooks_alone(client_wheel: Path) -> None:
    names = set(zipfile.ZipFile(client_wheel).namelist())
    shipped = {n for n in names if ".dist-info/" not in n}
    tracked = set(subprocess.run(["git", "ls-files", *CLIENT_ROOTS], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout.split())
    assert {p for p in package_dirs(CLIENT_ROOTS) if f"{p}/__init__.py" not in names} == set()
    assert "trainer_hooks/py.typed" in shipped  # its types, for the user's mypy
    # Every file trainer_hooks/ holds in the checkout (not yet committed ones too), no other.
    files = {p.relative_to(ROOT).as_posix() for root in CLIENT_ROOTS
             for p in (ROOT / root).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert tracked <= files and shipped == files


def test_a_wheel_built_from_the_server_sdist_needs_no_node(server_src: Path,
                                                          tmp_path: Path) -> None:
    """The sdist carries the front-end libraries the wheel's build step takes from
    node_modules/ (npm ci), so a wheel built from the sdist alone holds them too."""
    made = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta;"
                           " build_meta.build_sdist(sys.argv[1])", str(tmp_path / "sdist")],
                          cwd=server_src, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    [sdist] = (tmp_path / "sdist").glob("telescope_dashboard-*.tar.gz")
    with tarfile.open(sdist) as archive:
        tops = {Path(n).parts[1] for n in archive.getnames() if len(Path(n).parts) > 1}
    assert not tops & {*CLIENT_ROOTS, *DEV_ONLY}, tops  # the client's code is its own sdist's
    names = set(zipfile.ZipFile(build_server_wheel(sdist, tmp_path / "dist")).namelist())
    assert {"telescope_ui/vendor/sortablejs/sortable.esm.js",
            "telescope_ui/vendor/plotly/plotly.min.js",
            "telescope_ui/vendor/bundle/metrics.js"} <= names


def test_the_server_requires_its_dependencies_and_the_client_at_its_version(
        wheel: Path, client_wheel: Path) -> None:
    server = requirements(wheel)
    core = {requirement_name(r): r for r in server if "extra ==" not in r}
    assert SERVER_DEPS <= set(core), SERVER_DEPS - set(core)
    version = re.search(r"-(\d[^-]*)-py3", client_wheel.name)
    assert version and core["telescope-trainer-hooks"].endswith(f"=={version[1]}")
    assert not TRAINING_STACK & {requirement_name(r) for r in server}  # through the client
    client = requirements(client_wheel)
    assert CLIENT_DEPS == {requirement_name(r) for r in client if "extra ==" not in r}
    assert "django" not in {requirement_name(r) for r in client}
    stack = [r for r in client if requirement_name(r) in TRAINING_STACK]
    assert {requirement_name(r) for r in stack} == TRAINING_STACK
    pinned = [r for r in client if "==" in r.split(";")[0]]
    assert not pinned, f"the client's requirements must be ranges: {pinned}"


def test_telescope_serve_serves_pages_and_files_from_the_installed_package(
        venv: Path, served: tuple[str, Path]) -> None:
    url, data = served
    located = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import telescope_ui, trainer_hooks; print(telescope_ui.__file__);"
                              " print(trainer_hooks.__file__)"],
                             cwd=data, env=clean_env(), capture_output=True, text=True)
    [ui, hooks] = located.stdout.split()
    assert ui.startswith(str(venv)) and hooks.startswith(str(venv))  # the wheels', not ours
    status, page, _ = fetch(url + "/")
    assert status == 200 and b"<html" in page.lower()
    [runs_js] = set(re.findall(rb'/static/js/runs\.[0-9a-f]{12}\.js', page))
    js = fetch_static(url + runs_js.decode())
    # Its imports name hashed modules, served beside it and in static/js's subfolders.
    imports = re.findall(rb"""^import [^;]*?["'](\./[^"']+)["']""", js, re.M)
    assert imports and all(re.fullmatch(rb"\./(\w+/)*\w+\.[0-9a-f]{12}\.js", i) for i in imports)
    assert any(i.startswith(b"./core/") for i in imports)
    for module in imports:
        fetch_static(url + "/static/js/" + module[2:].decode())
    [app_css] = re.findall(rb'/static/css/app\.[0-9a-f]{12}\.css', page)
    assert fetch_static(url + app_css.decode()) == (ROOT / "static/css/app.css").read_bytes()
    # Collected into the data directory; the vendor files came from the installed packages.
    paths = json.loads((data / "static" / "staticfiles.json").read_text())["paths"]
    sortable = fetch_static(f"{url}/static/{paths['vendor/sortablejs/sortable.esm.js']}")
    assert sortable == (ROOT / "node_modules/sortablejs/modular/sortable.esm.js").read_bytes()
    plotly = fetch_static(f"{url}/static/{paths['vendor/plotly/plotly.min.js']}")
    built = bundle.plotly_file(ROOT / "node_modules")  # the same build as the checkout's
    assert built is not None and plotly == built.read_bytes()
    assert (data / "telescope.sqlite3").is_file()  # --data-dir, migrated


def test_telescope_token_and_demo_fill_the_served_database(
        venv: Path, served: tuple[str, Path]) -> None:
    url, data = served
    telescope = str(venv / "bin" / "telescope")
    token = subprocess.run([telescope, "token", "wheel-project", "--data-dir", str(data)],
                           cwd=data, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert token.returncode == 0, token.stderr
    assert re.fullmatch(r"tsk_[\w-]{20,}", token.stdout.strip().splitlines()[-1])
    demo = subprocess.run([telescope, "demo", "--steps", "3", "--data-dir", str(data)],
                          cwd=data, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    status, body, _ = fetch(url + "/api/runs")
    [run] = json.loads(body)["runs"]
    assert run["name"] == "grpo-demo" and run["last_step"] == 2
    status, page, _ = fetch(url + f"/runs/{run['id']}/metrics")
    modules = re.findall(rb'/static/((?:js|vendor)/[\w./-]+\.[0-9a-f]{12}\.js)', page)
    assert status == 200 and any(m.startswith(b"js/bundle/metrics.") for m in modules)
    for module in modules:  # the Metrics page and its modules
        fetch_static(url + "/static/" + module.decode())
    [plotly] = re.findall(rb'id="plotly-src"[^>]* href="(/static/vendor/plotly/[^"]+)"', page)
    assert len(fetch_static(url + plotly.decode())) > 1_000_000


def test_both_scripts_run_in_the_servers_install(venv: Path, tmp_path: Path) -> None:
    """`telescope-sync` (the client's) and `telescope sync` (the server's) in one venv: the
    same command, each under its own name; neither needs a database."""
    spool = tmp_path / "spool"
    spool.mkdir()
    for command in ([str(venv / "bin" / "telescope-sync")],
                    [str(venv / "bin" / "telescope"), "sync"]):
        helped = subprocess.run([*command, "--help"], cwd=tmp_path, env=clean_env(),
                                capture_output=True, text=True, timeout=60)
        assert helped.returncode == 0, helped.stderr
        assert "--spool DIR" in helped.stdout and "telescope-sync" in helped.stdout
        done = subprocess.run([*command, "--spool", str(spool)], cwd=tmp_path,
                              env=clean_env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"telescope sync: nothing to deliver in {spool}")
    usage = subprocess.run([str(venv / "bin" / "telescope-sync"), "--help"], cwd=tmp_path,
                           env=clean_env(), capture_output=True, text=True, timeout=60).stdout
    assert usage.startswith("usage: telescope-sync ")
