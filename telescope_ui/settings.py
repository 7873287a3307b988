"""Settings, read from the environment (docs/operations.md, docs/protocol.md "Limits").

Embedded default: SQLite in WAL mode under TELESCOPE_DATA_DIR and the in-process channel layer.
Scale-out: DATABASE_URL (PostgreSQL) and REDIS_URL (channels_redis pub/sub layer).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
# The front end (static/, templates/) sits beside the packages in a checkout and inside the
# telescope_ui package in a wheel (see pyproject.toml).
ASSETS_DIR = BASE_DIR if (BASE_DIR / "static").is_dir() else Path(__file__).resolve().parent


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def envlist(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    return default if value in (None, "") else [v.strip() for v in value.split(",") if v.strip()]


def envnetworks(name: str) -> list[str]:
    """A list of addresses or CIDR networks; a bad one stops the start, named."""
    values = envlist(name, [])
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {exc}") from None
    return values


DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])
CSRF_FAILURE_VIEW = "telescope_ui.api.csrf_failure"  # JSON under /api/, HTML for forms

DATA_DIR = Path(os.environ.get("TELESCOPE_DATA_DIR") or BASE_DIR / "data").resolve()


def tighten_secret(path: Path) -> None:
    """A key made by hand, or before keys were made 0600, is made owner-only; one we may not
    change (another owner) is still used."""
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except OSError:
        pass


def install_secret_key(data_dir: Path) -> str:
    """A random key made once per install and kept in the data directory (mode 600): fine for
    a dashboard on loopback. `python -m telescope_ui.serve` refuses other interfaces without
    an explicit SECRET_KEY. Unwritable data directory: a key for this process only."""
    path = data_dir / "secret_key"
    try:
        if not path.exists():
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process made it meanwhile
                pass
            else:
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_urlsafe(50))
        tighten_secret(path)
        return path.read_text().strip() or secrets.token_urlsafe(50)
    except OSError:
        return secrets.token_urlsafe(50)


SECRET_KEY = os.environ.get("SECRET_KEY") or install_secret_key(DATA_DIR)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ingest",
    "telescope_ui",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "telescope_ui.security.ContentSecurityPolicyMiddleware",
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "telescope_ui.access.ReadAccessMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "telescope_ui.urls"
ASGI_APPLICATION = "telescope_ui.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [ASSETS_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=600)}
    DATABASES["default"].setdefault("TEST", {})
    DATABASES["default"]["TEST"]["NAME"] = os.environ.get("TELESCOPE_TEST_DB") or None
else:
    DATABASES = {
        "default": {
            # Django's SQLite backend with the server's shared write lock (telescope_ui.sqlite3)
            "ENGINE": "telescope_ui.sqlite3",
            "NAME": str(DATA_DIR / "telescope.sqlite3"),
            "CONN_MAX_AGE": None,  # reconnecting re-runs the PRAGMAs: keep connections
            # IMMEDIATE: writers take the lock at BEGIN, so two writers never deadlock upgrading.
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                # The WAL is checkpointed by the server's pipeline sweep (PASSIVE, off the ack
                # path: a checkpoint in a commit cost ~18 ms per MB written); 64 MiB of WAL
                # make a commit checkpoint as a backstop (no server running, or one far behind).
                # secure_delete off: Debian builds SQLite zeroing every freed page, so a
                # compaction's or a run's delete wrote what it freed to the log once more.
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                    "PRAGMA busy_timeout=30000; PRAGMA cache_size=-65536; "
                    "PRAGMA wal_autocheckpoint=16384; PRAGMA secure_delete=OFF;"
                ),
            },
            "TEST": {"NAME": os.environ.get("TELESCOPE_TEST_DB") or None},
        }
    }

if os.environ.get("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "telescope_ui.channel_layer.PubSubChannelLayer",
            "CONFIG": {
                "hosts": [os.environ["REDIS_URL"]],
                # Separate deployments (or test servers) sharing one Redis stay apart.
                "prefix": os.environ.get("TELESCOPE_CHANNEL_PREFIX", "telescope"),
            },
        }
    }
else:
    # A page more than `expiry` seconds behind would be dropped from its runs' groups for good
    # (the in-memory layer's cleanup; found by bench/soak.py): keep messages a day instead. A
    # full channel (`capacity`) only loses pushes, which the page's seq check replays.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer",
                                  "CONFIG": {"expiry": 86400}}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# The static pipeline (telescope_ui.assets, docs/architecture.md#static-files): `collectstatic`
# gathers static/ and the vendor files into STATIC_ROOT under content-hashed names with gzip
# (and brotli) beside them; ServeStatic serves them in front of Django (telescope_ui.asgi).
# `python -m telescope_ui.serve` collects when a source changed; TELESCOPE_STATIC_ROOT points
# elsewhere than the data directory (the Docker image collects at build time).
STATIC_URL = "/static/"
STATICFILES_DIRS = [ASSETS_DIR / "static"]
STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder",
                       "telescope_ui.assets.VendorFinder", "telescope_ui.assets.BundleFinder"]
STATIC_ROOT = Path(os.environ.get("TELESCOPE_STATIC_ROOT") or DATA_DIR / "static").resolve()
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "telescope_ui.assets.StaticStorage"},
}
SERVESTATIC_KEEP_ONLY_HASHED_FILES = True

# Ingest limits (docs/protocol.md "Limits": 4413 too large, 4429 rate limited).
# Reads (pages, read API, live updates) from other than loopback need a signed-in user unless
# this is set (see telescope_ui.access).
TELESCOPE_PUBLIC_READ = envbool("TELESCOPE_PUBLIC_READ", False)
# Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For names the client; what
# comes through them is never trusted as loopback (telescope_ui.access.client).
TELESCOPE_TRUSTED_PROXIES = envnetworks("TELESCOPE_TRUSTED_PROXIES")
# A running run whose live trainer has sent no data for this long is shown as idle.
TELESCOPE_IDLE_SECONDS = envint("TELESCOPE_IDLE_SECONDS", 600)
# A running run not alive for this long (no ingest connection of its trainer open, no message,
# no heartbeat) is shown as crashed (ingest.core.progress).
TELESCOPE_CRASH_SECONDS = envint("TELESCOPE_CRASH_SECONDS", 120)
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
# Signed out: back to the sign-in page (without it Django renders registration/logged_out.html,
# which the site does not have).
LOGOUT_REDIRECT_URL = LOGIN_URL

TELESCOPE_MAX_MESSAGE_BYTES = envint("TELESCOPE_MAX_MESSAGE_BYTES", 8 * 1024 * 1024)
# Django's own cap on a request body (2.5 MiB by default) must not undercut ours: the ingest view
# answers a body over our limit with a JSON 413 itself.
DATA_UPLOAD_MAX_MEMORY_SIZE = TELESCOPE_MAX_MESSAGE_BYTES + 1
TELESCOPE_MAX_MESSAGES_PER_SECOND = envint("TELESCOPE_MAX_MESSAGES_PER_SECOND", 2000)
TELESCOPE_RATE_BURST = envint("TELESCOPE_RATE_BURST", 4000)
# Per token, across its connections and HTTP requests (ingest.write.admission): the rate of frames /
# bodies, and the bytes received but not yet applied the server holds for it at most.
TELESCOPE_TOKEN_MESSAGES_PER_SECOND = envint("TELESCOPE_TOKEN_MESSAGES_PER_SECOND", 8000)
TELESCOPE_TOKEN_RATE_BURST = envint("TELESCOPE_TOKEN_RATE_BURST", 16000)
TELESCOPE_TOKEN_BACKLOG_BYTES = envint("TELESCOPE_TOKEN_BACKLOG_BYTES", 64 << 20)
TELESCOPE_LIVE_INTERVAL_MS = envint("TELESCOPE_LIVE_INTERVAL_MS", 100)
# Sample text (`prompt`, `completion`; ingest.core.texts), in UTF-8 bytes. Per samples message: more
# is refused with an error naming the field. Per run: once a run holds this much, the text of
# further messages is left out (their samples are stored, the ack names the fields); 0 = none.
TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE = envint("TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE", 4 << 20)
TELESCOPE_MAX_TEXT_BYTES_PER_RUN = envint("TELESCOPE_MAX_TEXT_BYTES_PER_RUN", 1 << 30)
# How often the server looks for runs whose steps wait for (re-)aggregation on its own.
TELESCOPE_PIPELINE_SWEEP_MS = envint("TELESCOPE_PIPELINE_SWEEP_MS", 1000)
# Processes that aggregate samples per step (0 = on the server's own materializer thread).
# `python -m telescope_ui.serve` defaults to 1; in-process callers (tests, commands) to 0.
TELESCOPE_AGGREGATE_WORKERS = envint("TELESCOPE_AGGREGATE_WORKERS", 0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redis_outage": {"()": "telescope_ui.logs.RedisOutage"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # A traceback a second while Redis is down: one line every 30 s instead (telescope_ui.logs).
    "loggers": {"channels_redis.pubsub": {"filters": ["redis_outage"]}},
}
