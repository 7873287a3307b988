"""Run the dashboard under daphne: `python -m telescope_ui.serve [--host H] [--port P]`.

Same as `daphne telescope_ui.asgi:application`, but with daphne's WebSocket message cap raised
well above our own limit (at least DAPHNE_CAP_BYTES), so an oversized ingest frame reaches the
consumer and gets our 4413 close, instead of daphne dropping the connection without a close
code (and with it the replies to the frames before it).

Before serving it brings the static files up to date (`telescope_ui.assets.collect`: a
`collectstatic` into STATIC_ROOT when a source changed, about 1.5 s; nothing otherwise);
`--no-collectstatic` serves STATIC_ROOT as it is (collected by the deployment: the Docker image).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

DAPHNE_CAP_BYTES = 32 << 20
# What a connection reads from its socket at a time (and, as Twisted uses the same figure,
# buffers for writing before it pushes back on its producer); Twisted's default is 64 KiB.
# A trainer's frames run to hundreds of KB: each read costs Twisted's, autobahn's and
# daphne's per-call Python (autobahn formats its debug log lines whether or not they are
# logged), so fewer, larger reads leave the ingest thread more of the GIL. bench/vs_trackio.py:
# the server's CPU 1.39 / 1.48 s against 1.49 / 1.52 at 64 KiB (two runs of 7 rounds).
READ_BYTES = 1 << 20


LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def check_database() -> None:
    """Refuse to start, with the reason, when the database cannot be reached or is not
    migrated (rather than answering every request with a 500)."""
    from django.db import DatabaseError, connection
    from django.db.migrations.executor import MigrationExecutor

    try:
        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        url = os.environ.get("DATABASE_URL")
        where = "the embedded SQLite database"
        if url:  # never print a password
            parts = urlsplit(url)
            where = f"DATABASE_URL {parts.scheme}://{parts.hostname}:{parts.port}{parts.path}"
        sys.exit(f"telescope: cannot use the database ({where}): {exc}".strip())
    if unapplied:
        sys.exit(f"telescope: the database lacks {len(unapplied)} migration(s); run "
                 "`python manage.py migrate` first")


def check_static(collect: bool, verbosity: int) -> None:
    """Collect the static files when their sources changed (`collect`), and refuse to start
    without them: every page links them by their hashed names."""
    from django.conf import settings

    from telescope_ui import assets

    root = Path(settings.STATIC_ROOT)
    if collect:
        try:
            if assets.collect() and verbosity:
                print(f"Static files collected into {root}", flush=True)
        except Exception as exc:  # a source missing, an import that names no file, a full disk
            sys.exit(f"telescope: cannot collect the static files into {root}: {exc}")
    elif not (root / "staticfiles.json").is_file():
        sys.exit(f"telescope: no collected static files in {root}: run "
                 "`python manage.py collectstatic`, or start without --no-collectstatic")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--verbosity", type=int, default=1)
    parser.add_argument("--no-collectstatic", dest="collectstatic", action="store_false",
                        help="serve STATIC_ROOT as collected (do not collect changed sources)")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "telescope_ui.settings")
    os.environ.setdefault("TELESCOPE_AGGREGATE_WORKERS", "1")
    if args.host not in LOOPBACK and not os.environ.get("SECRET_KEY"):
        sys.exit(f"telescope: refusing to serve on {args.host} without SECRET_KEY: set the "
                 "SECRET_KEY environment variable to a long random string (on loopback a key "
                 "kept in the data directory is used)")

    import django

    django.setup()
    from django.db import connection

    if hasattr(connection, "install_write_lock"):  # the embedded SQLite: its writers wait on
        connection.install_write_lock()  # one lock, not in SQLite's sleeps (telescope_ui.sqlite3)
    check_database()
    check_static(args.collectstatic, args.verbosity)
    from daphne.server import Server
    from django.conf import settings
    from twisted.internet import tcp

    from ingest.pipeline.materialize import sweep_forever
    from telescope_ui.asgi import application

    def ready() -> None:  # the reactor's asyncio loop is set, not yet running
        loop = asyncio.get_event_loop()
        loop.create_task(sweep_forever(settings.TELESCOPE_PIPELINE_SWEEP_MS / 1000))

    cap = max(settings.TELESCOPE_MAX_MESSAGE_BYTES * 2, DAPHNE_CAP_BYTES)
    tcp.Connection.bufferSize = READ_BYTES
    print(f"Telescope dashboard on http://{args.host}:{args.port}/", flush=True)
    Server(
        application,
        endpoints=[f"tcp:port={args.port}:interface={args.host}"],
        websocket_max_message_size=cap,
        websocket_max_frame_size=cap,
        verbosity=args.verbosity,
        ready_callable=ready,
    ).run()


if __name__ == "__main__":
    main()
