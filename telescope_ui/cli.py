"""`telescope`: every command of the dashboard's server, from its install or a checkout.

    telescope serve [--host H] [--port P]          migrate, collect the static files (when
                                                   changed), serve; prints the URL
    telescope token PROJECT                        a new ingest token (shown once)
    telescope token --list [PROJECT]               the tokens (prefixes, never a token)
    telescope token --revoke PREFIX                revoke one
    telescope declare-ranges --project P --run R [--strict] FILE.yaml [FILE.yaml ...]
                                                   a run's reward and metric ranges
    telescope import tensorboard|trackio|wandb PATH --project P [--run NAME]
    telescope demo [--steps N]                     a synthetic GRPO run to look at
    telescope manage COMMAND [ARGS]                one of Django's own commands
                                                   (createsuperuser, changepassword, ...)
    telescope sync [--spool DIR] [--token T] [--dry-run]
                                                   deliver the outboxes trainers left
                                                   undelivered (no Django); where only the
                                                   trainer client is installed, the same
                                                   command is `telescope-sync`

`declare-ranges`, `import` and `demo` are the management commands `declare_ranges`, `import`
and `demo` (ingest.management.arguments: one definition of their options); Django's own
commands are `telescope manage COMMAND` (in a checkout also `manage.py COMMAND`). Long
commands show their progress on stderr: a bar on a terminal, plain lines elsewhere
(ingest.management.progress).

Every command but `sync` uses the data directory `--data-dir`, else `$TELESCOPE_DATA_DIR`, else
in a checkout its `data/` (where `manage.py` and `make run` keep it), else
`$XDG_DATA_HOME/telescope` (`~/.local/share/telescope`), and brings its database up to date
first, so `telescope token` works before the first `serve`. `DATABASE_URL`, `REDIS_URL` and
the other settings of the README's Configuration apply as they do to `manage.py`. In a checkout,
`make run` stays the one command to start.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ingest.management import arguments
from trainer_hooks import sync as trainer_sync

# A checkout (manage.py beside the package): its data/, as telescope_ui.settings' DATA_DIR.
CHECKOUT = Path(__file__).resolve().parents[1]


def default_data_dir() -> Path:
    if os.environ.get("TELESCOPE_DATA_DIR"):
        return Path(os.environ["TELESCOPE_DATA_DIR"])
    if (CHECKOUT / "manage.py").is_file():
        return CHECKOUT / "data"
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "telescope"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="telescope", description=__doc__.split("\n\n")[0],
                                epilog="`telescope COMMAND --help` describes each command "
                                "and its options.")
    p.add_argument("--data-dir", type=Path, help="where the SQLite database and local state "
                   "live (default: $TELESCOPE_DATA_DIR, else a checkout's data/, else "
                   "~/.local/share/telescope)")
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
    shared = []
    for command in arguments.SHARED:  # one definition with the management command
        shared.append(sub.add_parser(command.name, help=command.summary,
                                     description=command.help))
        command.add(shared[-1])
        shared[-1].add_argument("--traceback", action="store_true",
                                help="on an unexpected error, show its Python traceback "
                                "(as manage.py's --traceback)")
    about = ("run one of Django's own management commands (createsuperuser, changepassword, "
             "...) on the data directory, where an install has no manage.py")
    manage = sub.add_parser("manage", help=about, description=about)
    manage.add_argument("django_command", metavar="COMMAND",
                        help="the management command (`telescope manage help` lists them)")
    manage.add_argument("arguments", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="its arguments and options (`telescope manage COMMAND --help`)")
    about = ("deliver every outbox a trainer left undelivered (server down, process killed) "
             "to the server and run it was meant for; needs only trainer_hooks (the trainer "
             "client's own command, in its install alone too: telescope-sync)")
    sync = sub.add_parser("sync", help=about, description=about)
    trainer_sync.add_arguments(sync)
    for each in (serve, token, *shared, manage):  # also accepted after the command
        each.add_argument("--data-dir", type=Path, default=argparse.SUPPRESS,
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
    elif args.command == "manage":
        from django.core.management import execute_from_command_line

        execute_from_command_line(["telescope manage", args.django_command, *args.arguments])
    else:
        [command] = [c for c in arguments.SHARED if c.name == args.command]
        positional, options = forwarded(command, args)
        call_command(command.command, *positional, traceback=args.traceback, **options)


def forwarded(command: arguments.Shared, args: argparse.Namespace) -> tuple[list[Any],
                                                                          dict[str, Any]]:
    """`args` as call_command takes them for the management command `command`: its
    positional arguments (call_command parses those from a command line) and its options."""
    own = argparse.ArgumentParser(add_help=False)
    command.add(own)
    positional: list[Any] = []
    options: dict[str, Any] = {}
    for action in own._actions:
        value = getattr(args, action.dest)
        if action.option_strings:
            options[action.dest] = value
        else:
            positional += value if isinstance(value, list) else [value]
    return positional, options


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
