"""zenweb settings, read from the environment.

Without DATABASE_URL and REDIS_URL zenweb runs embedded: SQLite, an
in-process Celery worker on the memory broker, and the in-memory channel
layer. With them it runs as services: PostgreSQL, Redis as Celery broker and
channel layer, and any number of `celery -A zenweb worker` processes.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url

from zenweb.env import env_bool, env_float, env_int, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("ZENWEB_DATA_DIR", str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

# Off unless asked for, embedded too: a debug page shows settings, paths and
# tracebacks to anyone who can cause one (a 3 MB POST to /login/ is enough),
# and the query log grows in every long-lived worker thread.
DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    key = env_str("DJANGO_SECRET_KEY")
    if key:
        return key
    # Embedded default only: a random key kept beside the SQLite file, so a
    # fresh clone needs no setup and no key ever lives in the repository.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in env_str("DJANGO_CSRF_TRUSTED_ORIGINS").split(",") if o]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "zenweb.urls"
ASGI_APPLICATION = "zenweb.asgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Django's backend, with a transaction's BEGIN sent along with its
        # first statement (zenweb/postgresql/base.py).
        DATABASES["default"]["ENGINE"] = "zenweb.postgresql"
    if env_bool("ZENWEB_PG_PREPARE", True):
        # Django turns psycopg's prepared statements off (prepare_threshold
        # None), and then psycopg ignores even an explicit prepare=True. Any
        # number turns them back on for runs/sql.py's fixed statements, which
        # ask with prepare=True; the ORM's client-side cursors never prepare.
        DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 5
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "zenweb.sqlite3",
            # One writer at a time: IMMEDIATE takes the write lock up front so
            # two threads never deadlock upgrading a read lock; WAL lets the
            # dashboard read while a worker writes.
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # A file, not :memory:, so worker threads in tests share it; one per
            # test process (children inherit the name through the environment),
            # so two test runs in one checkout never share a database.
            "TEST": {
                "NAME": os.environ.setdefault("ZENWEB_TEST_DB", str(DATA_DIR / f"test-zenweb-{os.getpid()}.sqlite3"))
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# WhiteNoise serves static files from where they are (static/, the apps')
# whatever DEBUG says, so neither `make run` nor the Procfile's daphne needs
# collectstatic. Only DEBUG re-reads them on each request.
WHITENOISE_USE_FINDERS = True

REDIS_URL = env_str("REDIS_URL")
EMBEDDED = not REDIS_URL

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # The pub/sub layer delivered 3-4x more messages a second here than
            # RedisChannelLayer, whose capacity drops messages silently; the
            # dashboard backfills any gap from the event log either way.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    # channels' in-memory layer, safe for the worker threads to send to.
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "zenweb.channel_layers.InMemoryChannelLayer", "CONFIG": {"capacity": 10_000}}
    }

CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
# The memory broker polls once a second by default; a run is dozens of hops.
CELERY_BROKER_TRANSPORT_OPTIONS = {} if REDIS_URL else {"polling_interval": 0.01}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# The catalog shipped with zenweb; `load_catalog` reads every *.yaml here.
ZENWEB_CATALOG_DIR = Path(env_str("ZENWEB_CATALOG_DIR", str(BASE_DIR / "catalog")))
# How many worker threads the embedded launcher starts.
ZENWEB_EMBEDDED_CONCURRENCY = env_int("ZENWEB_EMBEDDED_CONCURRENCY", 4)
# How often an open run page's websocket re-checks the event log for events
# the channel layer did not deliver (another process, a dropped message).
ZENWEB_LIVE_POLL_SECONDS = env_float("ZENWEB_LIVE_POLL_SECONDS", 2.0)
# A live update redraws the routing graph of a run with at most this many
# steps itself; a bigger one's graph (235 KB and 100 ms for 500 steps) is
# marked stale instead, and each page fetches it at most once a second.
ZENWEB_LIVE_GRAPH_STEPS = env_int("ZENWEB_LIVE_GRAPH_STEPS", 60)

# Messaging limits (zenflow's defaults); a workflow's options can override them.
ZENWEB_MAX_MAILBOX_SIZE = env_int("ZENWEB_MAX_MAILBOX_SIZE", 10_000)  # 0 = unbounded
ZENWEB_COORDINATOR_WAKE_CYCLES = env_int("ZENWEB_COORDINATOR_WAKE_CYCLES", 100)
ZENWEB_STEP_WAKE_CYCLES = env_int("ZENWEB_STEP_WAKE_CYCLES", 10)
ZENWEB_HOLD_TIMEOUT = env_float("ZENWEB_HOLD_TIMEOUT", 30.0)
ZENWEB_MAX_TRANSCRIPT_BYTES = env_int("ZENWEB_MAX_TRANSCRIPT_BYTES", 1_000_000)
# Tools: each run's files and shell commands live in <workspaces>/run-<id>;
# a result longer than this reaches the model as an "omitted" preview.
ZENWEB_WORKSPACES = Path(env_str("ZENWEB_WORKSPACES", str(DATA_DIR / "workspaces")))
ZENWEB_MAX_TOOL_RESULT_CHARS = env_int("ZENWEB_MAX_TOOL_RESULT_CHARS", 16_000)


def _mcp_servers() -> dict:
    from django.core.exceptions import ImproperlyConfigured

    from agents.tools.mcp.config import McpConfigError, load_server_configs

    try:
        return load_server_configs()
    except McpConfigError as exc:
        raise ImproperlyConfigured(str(exc)) from None


# MCP servers whose tools every workflow may list (README, "MCP toolsets"):
# JSON in ZENWEB_MCP_SERVERS, or a JSON/YAML file named by
# ZENWEB_MCP_SERVERS_FILE. ${VAR} in them is read from the environment only
# when zenweb connects; servers start on first use, so one that is down
# never stops zenweb from starting.
ZENWEB_MCP_SERVERS = _mcp_servers()
# Durability: a step turn's lease (renewed while the model thinks), how often
# each worker sweeps for expired leases, and when a silent run counts as stuck.
ZENWEB_LEASE_SECONDS = env_float("ZENWEB_LEASE_SECONDS", 60.0)
ZENWEB_SWEEP_SECONDS = env_float("ZENWEB_SWEEP_SECONDS", 10.0)
ZENWEB_STUCK_AFTER = env_float("ZENWEB_STUCK_AFTER", 900.0)
# A run silent this long has its work re-enqueued by the sweeper (0 = never).
ZENWEB_RESUME_AFTER = env_float("ZENWEB_RESUME_AFTER", 120.0)
# A run still pending this long has its start task queued again (0 = never).
ZENWEB_REQUEUE_AFTER = env_float("ZENWEB_REQUEUE_AFTER", 60.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("ZENWEB_LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"}},
}
