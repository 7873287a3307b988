"""`telescope-sync [--spool DIR] [--token T] [--url URL] [--dry-run]`: deliver every outbox a
trainer left undelivered to the server and run it was meant for (the delivery is
`trainer_hooks.transport.sync`). The trainer client's console script (clients/python), so it
is there wherever `trainer_hooks` is installed: alone on a GPU node, or beside the server,
whose `telescope sync` is the same command. Also `python -m trainer_hooks.sync`; none of them
imports Django.

Prints a line per run (what it delivered, or why not) and exits 1 when something could not
be delivered, 0 otherwise (an outbox a running trainer holds is left to it).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `telescope-sync` and `telescope sync` (one definition)."""
    p.add_argument("--spool", type=Path, metavar="DIR",
                   help="the spool directory the trainers wrote their outboxes to (default: "
                   "$TELESCOPE_SPOOL_DIR, else ~/.cache/telescope/spool; a trainer's "
                   "connect(spool_dir=...))")
    p.add_argument("--token", metavar="T",
                   help="send with this ingest token instead of the one each outbox kept "
                   "(needed for outboxes written before outboxes kept their token)")
    p.add_argument("--url", metavar="URL", type=_server_url,
                   help="send to this server (ws:// or http://HOST:PORT) instead of the one "
                   "each outbox kept (needed for outboxes written before they kept theirs)")
    p.add_argument("--dry-run", action="store_true",
                   help="list what would be delivered, per run, and send nothing")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="give up on a run when the server acknowledged nothing for this long "
                   "(default: 30)")


def _server_url(value: str) -> str:
    from trainer_hooks.transport.run import ingest_url

    try:
        return ingest_url(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """Deliver as `args` say; the exit status."""
    from trainer_hooks.transport.outbox import default_dir
    from trainer_hooks.transport.sync import sync

    # The sender's warnings (cannot reach the server, a refused token) on stderr; the report
    # on stdout.
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    return sync(args.spool or default_dir(), token=args.token, url=args.url,
                dry_run=args.dry_run, patience=args.timeout,
                echo=lambda line: print(line, flush=True))


def main(argv: list[str] | None = None, prog: str = "telescope-sync") -> None:
    """The console script `telescope-sync` (clients/python/pyproject.toml)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    add_arguments(p)
    try:
        sys.exit(run(p.parse_args(argv)))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main(prog="python -m trainer_hooks.sync")
