"""zenweb settings, read from the environment.

Without DATABASE_URL and REDIS_URL zenweb runs embedded: SQLite, an
in-process Celery worker on the memory broker, and the in-memory channel
layer. With them it runs as services: PostgreSQL, Redis as Celery broker and
channel layer, and any number of `celery -A zenweb worker` processes.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Literal

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from zenweb.databases import postgres, serves_http
from zenweb.env import env_bool, env_choice, env_float, env_int, env_str
from zenweb.private_files import keep_first, private_dir, private_file

BASE_DIR = Path(__file__).resolve().parent.parent


def _default_data_dir() -> Path:
    """var/ in a checkout; installed from the wheel (no manage.py beside the
    packages), the user's data directory rather than site-packages."""
    if (BASE_DIR / "manage.py").is_file():
        return BASE_DIR / "var"
    return Path(env_str("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "zenweb"


DATA_DIR = private_dir(Path(env_str("ZENWEB_DATA_DIR") or _default_data_dir()))

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
        # Processes started together (a server and a worker, two test runs) make one key.
        return keep_first(path, secrets.token_urlsafe(50)).strip()
    path.chmod(0o600)  # one an older zenweb wrote may be world-readable
    return path.read_text().strip()


SECRET_KEY = _secret_key()


ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in env_str("DJANGO_CSRF_TRUSTED_ORIGINS").split(",") if o]

# Served over HTTPS only (docs/production.md): redirect plain HTTP, send
# cookies over HTTPS only, and tell browsers never to use HTTP again (HSTS).
# Off by default: the embedded default serves http://127.0.0.1.
HTTPS = env_bool("DJANGO_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", HTTPS)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", HTTPS)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", HTTPS)
# Behind a proxy that ends TLS, the header it sets to "https" (e.g.
# X-Forwarded-Proto); without it every request looks like plain HTTP and the
# redirect would loop. Only name a header the proxy always overwrites.
if _proxy_header := env_str("DJANGO_SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")
# Probes and scrapers (docs/operations.md) ask over plain HTTP, from inside: a redirect is not an answer.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

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
    # django-ninja's templates and static files: /api/docs serves Swagger UI
    # from this server, not a CDN.
    "ninja",
    "axes",
    "runs",
    # The project itself: its launchers (manage.py serve, run_workflow) start
    # workers and daphne, so they sit above runs (zenweb -> runs -> agents).
    "zenweb",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "zenweb.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "zenweb.urls"
ASGI_APPLICATION = "zenweb.asgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:list"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Each app's templates/: the dashboard's are the runs app's (runs/templates/).
        "DIRS": [],
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
# The web process's (daphne's, `serve`'s) PostgreSQL pool: at most this many
# connections; a request that finds none free waits this long, then gets a
# 503 with Retry-After (zenweb/databases.py, docs/production.md).
ZENWEB_DB_POOL = env_int("ZENWEB_DB_POOL", 10)
ZENWEB_DB_POOL_TIMEOUT = env_float("ZENWEB_DB_POOL_TIMEOUT", 10.0)
if DATABASE_URL:
    if ZENWEB_DB_POOL < 1 or ZENWEB_DB_POOL_TIMEOUT <= 0:
        raise ImproperlyConfigured("ZENWEB_DB_POOL must be at least 1 and ZENWEB_DB_POOL_TIMEOUT above 0")
    _web = serves_http()
    DATABASES = {
        "default": postgres(
            dict(dj_database_url.parse(DATABASE_URL)),
            web=_web,
            # `serve` without Redis runs the embedded worker's threads in the
            # web process too: each holds a connection while it works.
            pool=ZENWEB_DB_POOL + (env_int("ZENWEB_EMBEDDED_CONCURRENCY", 4) + 2 if not env_str("REDIS_URL") else 0),
            timeout=ZENWEB_DB_POOL_TIMEOUT,
            prepare=env_bool("ZENWEB_PG_PREPARE", True),
        )
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            # Created 0600 before SQLite opens it (SQLite would use the umask).
            "NAME": private_file(DATA_DIR / "zenweb.sqlite3"),
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

# Password logins (the dashboard's and the admin's) are limited by django-axes:
# after ZENWEB_LOGIN_FAILURE_LIMIT failures for one username, or from one
# address, that username or address is locked out, the right password too,
# until ZENWEB_LOGIN_LOCKOUT_MINUTES pass without another try. API tokens are
# not passwords (random, 256 bits): they are not counted.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("ZENWEB_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("ZENWEB_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# runs/static/ is the runs app's: the app-directories finder collects it.
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# WhiteNoise serves static files from where they are (the apps' static/)
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
        "default": {"BACKEND": "runs.channel_layers.InMemoryChannelLayer", "CONFIG": {"capacity": 10_000}}
    }


# Caches shared by every process of an install: in Redis when there is one
# (separate processes), else in this process's memory (embedded: the worker
# threads and daphne share it). Redis away: a partial answer or a rate count
# is not worth a stalled request, hence the short timeouts.
def _shared_cache(prefix: str) -> dict:
    if not REDIS_URL:
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": prefix}
    return {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": prefix,
        "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5},
    }


# "live" holds each generating step's answer so far (runs/partials.py), for a
# page that connects mid-answer: the worker writes it, daphne reads it.
# "rate_limits" counts each API token's commands (runs/api/rate_limits.py).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "live": _shared_cache("zenweb-live"),
    "rate_limits": _shared_cache("zenweb-rate"),
}

CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
# kombu's Redis transport with one error more counted as a lost connection (zenweb/broker.py).
CELERY_BROKER_TRANSPORT = "zenweb.broker:Transport" if REDIS_URL else None
# The memory broker polls once a second by default; a run is dozens of hops.
CELERY_BROKER_TRANSPORT_OPTIONS = {} if REDIS_URL else {"polling_interval": 0.01}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# The catalog shipped with zenweb (package data of runs, so it is in the
# wheel too); `load_catalog` reads every *.yaml here.
ZENWEB_CATALOG_DIR = Path(env_str("ZENWEB_CATALOG_DIR", str(BASE_DIR / "runs" / "catalog")))
# How many worker threads the embedded launcher starts.
ZENWEB_EMBEDDED_CONCURRENCY = env_int("ZENWEB_EMBEDDED_CONCURRENCY", 4)
# How often an open run page's websocket re-checks the event log for events
# the channel layer did not deliver (another process, a dropped message).
ZENWEB_LIVE_POLL_SECONDS = env_float("ZENWEB_LIVE_POLL_SECONDS", 2.0)
# A live update redraws the routing graph of a run with at most this many
# steps itself; a bigger one's graph (235 KB and 100 ms for 500 steps) is
# marked stale instead, and each page fetches it at most once a second.
ZENWEB_LIVE_GRAPH_STEPS = env_int("ZENWEB_LIVE_GRAPH_STEPS", 60)
# Live run pages one user may have open at once, per daphne process (0 = no cap).
ZENWEB_MAX_WEBSOCKETS_PER_USER = env_int("ZENWEB_MAX_WEBSOCKETS_PER_USER", 20)


def _model_prices() -> dict:
    from agents.prices import parse_prices

    try:
        return parse_prices(env_str("ZENWEB_MODEL_PRICES"))
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


# Model prices per million tokens, as JSON (docs/models.md, "Prices"); none shipped.
ZENWEB_MODEL_PRICES = _model_prices()
# /metrics answers a scraper sending it as a bearer token; unset, /metrics is off (docs/operations.md).
ZENWEB_METRICS_TOKEN = env_str("ZENWEB_METRICS_TOKEN")

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


def _sandbox():
    from django.core.exceptions import ImproperlyConfigured

    from agents.sandbox import UID_BASE, UID_COUNT, ProcessLimits, Sandbox

    given = env_str("ZENWEB_SANDBOX", "on").strip().lower()
    if given not in ("on", "off"):
        raise ImproperlyConfigured(f"ZENWEB_SANDBOX={given!r}: use on (the default) or off")
    mode: Literal["on", "off"] = "on" if given == "on" else "off"
    # As root each run's commands run as uid base + run id mod count (docs/sandbox.md).
    uid_base = env_int("ZENWEB_SANDBOX_UID_BASE", UID_BASE)
    uid_count = env_int("ZENWEB_SANDBOX_UID_COUNT", UID_COUNT)
    if uid_base < 1 or uid_count < 0 or uid_base + uid_count > 2**32 - 2:
        raise ImproperlyConfigured(
            f"ZENWEB_SANDBOX_UID_BASE={uid_base}, ZENWEB_SANDBOX_UID_COUNT={uid_count}: the range must lie "
            f"within 1..{2**32 - 2} (a count of 0 runs every run as ZENWEB_SANDBOX_UID)"
        )
    cgroup = env_str("ZENWEB_SANDBOX_CGROUP", "").strip()
    if cgroup not in ("", "off") and not cgroup.startswith("/"):
        raise ImproperlyConfigured(
            f"ZENWEB_SANDBOX_CGROUP={cgroup!r}: use off, or a cgroup path such as /zenweb (as /proc/self/cgroup "
            "writes them); unset, each call's cgroup goes under zenweb's own"
        )
    default = ProcessLimits()
    maxima = ProcessLimits(
        processes=env_int("ZENWEB_SANDBOX_MAX_PROCESSES", default.processes),
        cpu_seconds=env_int("ZENWEB_SANDBOX_MAX_CPU_SECONDS", default.cpu_seconds),
        memory_mb=env_int("ZENWEB_SANDBOX_MAX_MEMORY_MB", default.memory_mb),
        file_size_mb=env_int("ZENWEB_SANDBOX_MAX_FILE_SIZE_MB", default.file_size_mb),
        disk_mb=env_int("ZENWEB_SANDBOX_MAX_DISK_MB", default.disk_mb),
        network=env_bool("ZENWEB_SANDBOX_ALLOW_NETWORK", False),
    )
    # filesystem: each workspace its own file system where the host can mount one (agents/workspace_quota.py).
    quota = env_str("ZENWEB_WORKSPACE_QUOTA", "filesystem").strip().lower()
    if quota not in ("filesystem", "checked"):
        raise ImproperlyConfigured(f"ZENWEB_WORKSPACE_QUOTA={quota!r}: use filesystem (the default) or checked")
    return Sandbox(
        mode=mode,
        bwrap=env_str("ZENWEB_SANDBOX_BWRAP", "bwrap"),
        uid=env_int("ZENWEB_SANDBOX_UID", 65534),
        uid_base=uid_base,
        uid_count=uid_count,
        cgroup=cgroup,
        limits=maxima,
        workspace_fs=quota == "filesystem",
    )


# How tool processes (run_shell, stdio MCP servers) start: bubblewrap with
# these maxima (docs/sandbox.md). ZENWEB_SANDBOX=off is the explicit opt-out.
ZENWEB_SANDBOX = _sandbox()


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


def _secret_values() -> tuple[str, ...]:
    """Every secret value zenweb knows of, for the redaction of tool output:
    the signing key, the admin password file, the database and Redis
    passwords, any variable whose name says it is secret, and every variable
    an MCP server's config uses (whatever its name: GH_PAT in a header, a
    URL with a key), which a server can echo in a result or an error."""
    from urllib.parse import urlsplit

    from agents.redaction import secret_values

    files = [DATA_DIR / "secret_key", DATA_DIR / "admin_password"]
    extra = [SECRET_KEY, *(p.read_text().strip() for p in files if p.is_file())]
    for url in (env_str("DATABASE_URL"), env_str("REDIS_URL")):
        try:
            extra.append(urlsplit(url).password or "")
        except ValueError:
            continue
    for config in ZENWEB_MCP_SERVERS.values():
        extra.extend(os.environ.get(name, "") for name in config.variables())
    return secret_values(os.environ, extra)


ZENWEB_SECRET_VALUES = _secret_values()
# Off: the person who started a run cannot approve its requests. On, for a
# single-person install: they can where one approval is required (never
# under the two-person rule); the approvals page says so.
ZENWEB_ALLOW_SELF_APPROVAL = env_bool("ZENWEB_ALLOW_SELF_APPROVAL", False)
# How long a step's ask_person call waits for an answer before its result
# says that none came (seconds; docs/tools.md, "Asking a person").
ZENWEB_ASK_PERSON_TIMEOUT = env_float("ZENWEB_ASK_PERSON_TIMEOUT", 86_400.0)
if ZENWEB_ASK_PERSON_TIMEOUT <= 0:
    raise ImproperlyConfigured("ZENWEB_ASK_PERSON_TIMEOUT must be a number of seconds above 0")
# Approvers are told when something waits for them (runs/actions/notifications.py):
# an email each, and a signed JSON POST when a webhook URL is set. Links to
# the run page are absolute under ZENWEB_BASE_URL (e.g. https://zen.example.com).
ZENWEB_BASE_URL = env_str("ZENWEB_BASE_URL").rstrip("/")
ZENWEB_APPROVAL_WEBHOOK_URL = env_str("ZENWEB_APPROVAL_WEBHOOK_URL")
ZENWEB_APPROVAL_WEBHOOK_SECRET = env_str("ZENWEB_APPROVAL_WEBHOOK_SECRET")
ZENWEB_APPROVAL_WEBHOOK_ATTEMPTS = env_int("ZENWEB_APPROVAL_WEBHOOK_ATTEMPTS", 5)
ZENWEB_APPROVAL_WEBHOOK_RETRY_SECONDS = env_float("ZENWEB_APPROVAL_WEBHOOK_RETRY_SECONDS", 10.0)
if ZENWEB_APPROVAL_WEBHOOK_URL and not ZENWEB_APPROVAL_WEBHOOK_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("ZENWEB_APPROVAL_WEBHOOK_URL must be an http:// or https:// address")
if ZENWEB_APPROVAL_WEBHOOK_URL and len(ZENWEB_APPROVAL_WEBHOOK_SECRET) < 16:
    raise ImproperlyConfigured(
        "ZENWEB_APPROVAL_WEBHOOK_URL needs ZENWEB_APPROVAL_WEBHOOK_SECRET (16 characters or more) to sign its posts"
    )
if ZENWEB_APPROVAL_WEBHOOK_ATTEMPTS < 1 or ZENWEB_APPROVAL_WEBHOOK_RETRY_SECONDS < 0:
    raise ImproperlyConfigured(
        "ZENWEB_APPROVAL_WEBHOOK_ATTEMPTS must be at least 1 and ZENWEB_APPROVAL_WEBHOOK_RETRY_SECONDS not negative"
    )
# Django's email settings, for the approvers' emails. Without EMAIL_HOST (or
# an EMAIL_BACKEND) the emails are written to the process's output.
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_BACKEND = env_str("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "zenweb@localhost")
# Runs one person may have under way at once (pending, running or waiting
# for approval; runs started by their runs' tool calls not counted): past
# it a new run or command is refused, before any model is asked, so that a
# client looping on POST /api/commands fills no queue. 0: no limit.
ZENWEB_MAX_ACTIVE_RUNS = env_int("ZENWEB_MAX_ACTIVE_RUNS", 20)
# Commands one API token (or one browser session) may send through
# POST /api/commands in a minute: past it a 429 with Retry-After, before the
# command is read (runs/api/rate_limits.py). 0: no limit.
ZENWEB_API_COMMANDS_PER_MINUTE = env_int("ZENWEB_API_COMMANDS_PER_MINUTE", 30)
# Durability: a step turn's lease (renewed while the model thinks), how often
# each worker sweeps for expired leases, and when a silent run counts as stuck.
ZENWEB_LEASE_SECONDS = env_float("ZENWEB_LEASE_SECONDS", 60.0)
ZENWEB_SWEEP_SECONDS = env_float("ZENWEB_SWEEP_SECONDS", 10.0)
# A process holding leases beats this often; four beats missed and it is
# dead, its leases handed on (one on this machine whose pid is gone at once).
# Each worker checks for dead ones this often too. 0: leases only.
ZENWEB_HEARTBEAT_SECONDS = env_float("ZENWEB_HEARTBEAT_SECONDS", 3.0)
ZENWEB_STUCK_AFTER = env_float("ZENWEB_STUCK_AFTER", 900.0)
# A run silent this long has its work re-enqueued by the sweeper (0 = never).
ZENWEB_RESUME_AFTER = env_float("ZENWEB_RESUME_AFTER", 120.0)
# A run still pending this long has its start task queued again (0 = never).
ZENWEB_REQUEUE_AFTER = env_float("ZENWEB_REQUEUE_AFTER", 60.0)

# How log lines look: "line" (for people) or "json" (for a log pipeline).
ZENWEB_LOG_FORMAT = env_choice("ZENWEB_LOG_FORMAT", ("line", "json"), "line")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # When, how bad, where from, which process: a worker's line among many workers' in one journal.
    "formatters": {
        "line": {"format": "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"},
        # ZENWEB_LOG_FORMAT=json: a JSON object a line, with the run, step,
        # task and trace a line belongs to where known (zenweb/telemetry.py).
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s",
        },
    },
    "filters": {"context": {"()": "zenweb.telemetry.LogContext"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": ZENWEB_LOG_FORMAT,
            "filters": ["context"] if ZENWEB_LOG_FORMAT == "json" else [],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("ZENWEB_LOG_LEVEL", "INFO")},
    "loggers": {
        "daphne": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
        # django-axes: failed logins and lockouts are warnings; its banner on
        # every start and a line per successful login are not needed.
        "axes": {"level": "WARNING"},
    },
}
