"""`telescope`: the dashboard from a pip install (`pip install "telescope-dashboard[server]"`).

    telescope serve [--host H] [--port P] [--data-dir DIR]   migrate, collect the static files
                                                             (when changed), serve; prints the URL
    telescope token PROJECT                                  a new ingest token (shown once)
    telescope token --list [PROJECT] | --revoke PREFIX       the tokens (no secrets); revoke one
    telescope import tensorboard|trackio|wandb PATH --project P [--run NAME]
    telescope demo                                           a synthetic GRPO run to look at
    telescope sync [--spool DIR] [--token T] [--dry-run]     deliver the outboxes trainers
                                                             left undelivered (no Django)

Every command uses the data directory `--data-dir`, else `$TELESCOPE_DATA_DIR`, else
`$XDG_DATA_HOME/telescope` (`~/.local/share/telescope`), and brings its database up to date
first, so `telescope token` works before the first `serve`. `DATABASE_URL`, `REDIS_URL` and
the other settings of the README's Configuration apply as they do to `manage.py`. In a checkout,
`make run` stays the one command.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from trainer_hooks import sync as trainer_sync


def default_data_dir() -> Path:
    if os.environ.get("TELESCOPE_DATA_DIR"):
        return Path(os.environ["TELESCOPE_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "telescope"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="telescope", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, help="where the SQLite database and local state "
                   "live (default: $TELESCOPE_DATA_DIR or ~/.local/share/telescope)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="migrate the database, collect the static files into "
                           "the data directory when they changed, then serve the dashboard")
    serve.add_argument("--host", default="127.0.0.1", help="the interface to listen on "
                       "(default 127.0.0.1; another needs SECRET_KEY)")
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    about = ("create an ingest token for PROJECT (shown once); --list the tokens (prefix, "
             "project, created, last used; never a token), --revoke one by its prefix")
    token = sub.add_parser("token", help=about, description=about)
    token.add_argument("project", nargs="?", help="the project (created if needed) of a new "
                       "token; with --list, only its tokens")
    what = token.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="list the tokens instead of "
                      "creating one")
    what.add_argument("--revoke", metavar="PREFIX", help="revoke the token whose prefix (as "
                      "--list shows it) this is: refused at once, open connections closed")
    imp = sub.add_parser("import", help="import TensorBoard, trackio or W&B offline runs; "
                         "exits 1 when a run was not imported (a damaged file: named with "
                         "where it is damaged, nothing of that run stored)")
    imp.add_argument("source", choices=("tensorboard", "trackio", "wandb"),
                     help="the tool that logged the runs")
    imp.add_argument("path", help="TensorBoard log dir or event file; a trackio project .db; "
                     "a W&B offline-run folder or a folder of them")
    imp.add_argument("--project", required=True, help="the Telescope project")
    imp.add_argument("--run", help="the Telescope run name (when PATH holds one run; "
                     "default: the run's own name)")
    demo = sub.add_parser("demo", help="ingest a synthetic GRPO run to look at")
    demo.add_argument("--project", default="demo", help="the project (default demo)")
    demo.add_argument("--run", default="grpo-demo", help="the run (default grpo-demo)")
    demo.add_argument("--steps", type=int, default=200, help="how many steps (default 200)")
    about = ("deliver every outbox a trainer left undelivered (server down, process killed) "
             "to the server and run it was meant for; needs only trainer_hooks (also: python "
             "-m trainer_hooks.sync)")
    sync = sub.add_parser("sync", help=about, description=about)
    trainer_sync.add_arguments(sync)
    for command in (serve, token, imp, demo):  # also accepted after the command
        command.add_argument("--data-dir", type=Path, default=argparse.SUPPRESS,
                             help="as --data-dir before the command")
    return p


def setup(data_dir: Path) -> None:
    """Point Django at `data_dir`, load it, and migrate the database (quietly)."""
    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # owner only (telescope_ui.private)
    os.environ["TELESCOPE_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "telescope_ui.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def run(args: argparse.Namespace) -> None:
    from django.core.management import call_command

    if args.command == "serve":
        from telescope_ui import serve

        print(f"Telescope data in {os.environ['TELESCOPE_DATA_DIR']}; send metrics with a "
              "token from `telescope token PROJECT`", flush=True)
        serve.main(["--host", args.host, "--port", str(args.port)])
    elif args.command == "token":
        token_command(args)
    elif args.command == "import":
        options: dict[str, Any] = {"project": args.project}
        if args.run:
            options["run"] = args.run
        call_command("import", args.source, args.path, **options)
    elif args.command == "demo":
        call_command("demo", project=args.project, run=args.run, steps=args.steps)


def token_command(args: argparse.Namespace) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    if args.revoke is not None:
        if args.project:
            raise CommandError("token --revoke PREFIX takes no PROJECT")
        call_command("tokens", revoke=args.revoke)
    elif args.list:
        call_command("tokens", list=True, project=args.project)
    elif args.project:
        call_command("createtoken", project=args.project)
    else:
        raise CommandError("token: give PROJECT (a new token), --list [PROJECT] or "
                           "--revoke PREFIX")


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.command == "sync":  # on a trainer's machine: no Django, no database
        sys.exit(trainer_sync.run(args))
    setup(args.data_dir or default_data_dir())
    from django.core.management.base import CommandError

    try:
        run(args)
    except CommandError as exc:
        sys.exit(f"telescope: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
