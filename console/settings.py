"""Fulcrum console settings: flat and environment-driven (docs/deployers/configuration.md)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import Http404
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("FULCRUM_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).lower() in {"1", "true", "yes", "on"}


# Demo mode (``make run``, the tests): a development secret key, local hosts and the shared
# broker token. Anything else is the production profile: DJANGO_SECRET_KEY and
# DJANGO_ALLOWED_HOSTS are required, and each broker has its own token (docs/deployers/at-scale.md).
FULCRUM_DEMO = _env_bool("FULCRUM_DEMO", False)


def _required(name: str, demo_default: str) -> str:
    value = os.environ.get(name, "")
    if value:
        return value
    if FULCRUM_DEMO:
        return demo_default
    raise ImproperlyConfigured(f"{name} is required outside demo mode (FULCRUM_DEMO=1)")


SECRET_KEY = _required("DJANGO_SECRET_KEY", "fulcrum-demo-only-secret-" + "x" * 40)
DEBUG = _env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = _required("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
# Behind a TLS-terminating proxy: secure cookies, HSTS and the redirect to HTTPS.
FULCRUM_HTTPS = _env_bool("FULCRUM_HTTPS", False)
SECURE_SSL_REDIRECT = FULCRUM_HTTPS
SESSION_COOKIE_SECURE = FULCRUM_HTTPS
CSRF_COOKIE_SECURE = FULCRUM_HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if FULCRUM_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = FULCRUM_HTTPS
SECURE_HSTS_PRELOAD = FULCRUM_HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if FULCRUM_HTTPS else None
SESSION_COOKIE_HTTPONLY = True
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

INSTALLED_APPS = [
    # Not "daphne": its app only swaps `manage.py runserver` for an ASGI one and costs every
    # process about 30 MB (Twisted); Fulcrum serves with uvicorn, and Channels' live-server
    # tests start daphne themselves.
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served from here (no CDN)
    "channels",
    "axes",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "console.middleware.nul_refused",
    "console.middleware.body_limited",
    "console.middleware.json_checked",
    "console.middleware.store_fallback",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: counts failed logins and locks the account out.
    "axes.middleware.AxesMiddleware",
]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling (django-axes): 5 failures per username and address lock it for 15 minutes.
AXES_FAILURE_LIMIT = int(os.environ.get("FULCRUM_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = 0.25  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# The lockout page: the console's navigation, the cool-off and when it ends (console.views).
AXES_LOCKOUT_CALLABLE = "console.views.lockout"

ROOT_URLCONF = "console.urls"
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
                "console.access.role",
                "console.context_processors.pulsar_conflict",
                "console.context_processors.store_outage",
            ]
        },
    }
]
WSGI_APPLICATION = None
ASGI_APPLICATION = "console.asgi.application"

# SQLite by default; DATABASE_URL=postgres://user:pass@host:5432/fulcrum for PostgreSQL.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'fulcrum.sqlite3'}"),
        conn_max_age=60,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, worker, beat, simulator) write; wait instead of failing on a lock.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    # Channels' live-server tests run daphne in another process: it needs a file database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_fulcrum.sqlite3")}
else:
    # Named explicitly: Channels' live server derives the name again in its forked process and
    # would otherwise connect to "test_test_..." (django/channels#2176).
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where ``collectstatic`` puts the files for production; unset, WhiteNoise serves them from the
# apps' and STATICFILES_DIRS' folders.
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT") or None
# WhiteNoise serves the static files with DEBUG off; from the finders, so no collectstatic is
# needed for the demo (production may run it).
WHITENOISE_USE_FINDERS = True

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6390/0")


def channel_layer_host(url: str) -> dict[str, object]:
    """A channels_redis host that heals after a Redis restart: an idle pooled connection is
    checked before use and a failed command is retried on a fresh one (redis-py's Retry)."""
    return {
        "address": url,
        "health_check_interval": 5,
        "socket_keepalive": True,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.1, cap=2.0), 5),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError, ConnectionError, OSError],
    }


CHANNEL_LAYERS = {
    "default": (
        {"BACKEND": "channels.layers.InMemoryChannelLayer"}
        if os.environ.get("FULCRUM_CHANNEL_LAYER") == "memory"
        else {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [channel_layer_host(REDIS_URL)]},
        }
    )
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.api.permissions.BrokerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["console.api.permissions.IsUser"],
    # JSON only, strictly (console.services.bodies): 413 / 400, never a 500 or a last-wins key.
    "DEFAULT_PARSER_CLASSES": ["console.api.parsers.StrictJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # drf-spectacular's, with every operation's refusals in the one error shape (``default``).
    "DEFAULT_SCHEMA_CLASS": "console.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Fulcrum API",
    "VERSION": "0.1.0",
    "DESCRIPTION": (
        'Every refusal has one shape: {"error": {"code", "message", "field"}} '
        "(code from the status: invalid, not_authenticated, forbidden, not_found, conflict, "
        "too_large, unavailable...; field: the input at fault, or null)."
    ),
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The enums' components (drf-spectacular's default hook), then the pydantic models' JSON
    # Schema said in OpenAPI 3.0's words (``spectacular --validate``).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.api.schema.openapi_3_0",
    ],
    # Choice sets several answers share, named once each (drf-spectacular names a set by its
    # field, and a field name with several sets by a hash).
    "ENUM_NAME_OVERRIDES": {
        "BrokerStateEnum": "console.api.responses.common.BROKER_STATES",
        "ReasonEnum": "console.api.responses.common.REASONS",
        "ControlActionEnum": "console.api.responses.common.CONTROL_ACTIONS",
        "AuditActionEnum": "console.models.AuditEvent.Action",
    },
}

# Brokers authenticate with their own tokens (``manage.py broker_token``). Demo mode also takes
# this shared token, which may speak for any broker (the simulator's).
FULCRUM_BROKER_TOKEN = (
    os.environ.get("FULCRUM_BROKER_TOKEN", "fulcrum-dev-broker-token") if FULCRUM_DEMO else ""
)
# The live load store's Redis keys start with this (the tests use their own).
FULCRUM_LOAD_STORE_PREFIX = os.environ.get("FULCRUM_LOAD_STORE_PREFIX", "fulcrum:load:")
# A load report body is at most this many bytes (413 above).
FULCRUM_MAX_REPORT_BYTES = int(os.environ.get("FULCRUM_MAX_REPORT_BYTES", str(4 * 1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = FULCRUM_MAX_REPORT_BYTES + 1024
# Every operator action is refused with 403 when set (a look-only console).
FULCRUM_READ_ONLY = _env_bool("FULCRUM_READ_ONLY", False)
# The Parquet history (console.services.history): tables partitioned by date, compacted into
# files of >= 50,000 rows, partitions older than the retention dropped (0: kept forever).
FULCRUM_HISTORY_RETENTION_DAYS = float(os.environ.get("FULCRUM_HISTORY_RETENTION_DAYS", "30"))
FULCRUM_HISTORY_COMPACT_S = float(os.environ.get("FULCRUM_HISTORY_COMPACT_S", "3600"))
FULCRUM_HISTORY_DIR = Path(os.environ.get("FULCRUM_HISTORY_DIR", VAR_DIR / "history"))
FULCRUM_REPORTS_DIR = Path(os.environ.get("FULCRUM_REPORTS_DIR", VAR_DIR / "reports"))
# Exported load reports are kept this long in the database (the Parquet history keeps them all).
FULCRUM_REPORT_RETENTION_S = float(os.environ.get("FULCRUM_REPORT_RETENTION_S", str(6 * 3600)))
# Safety rules on top of every strategy: a moved bundle stays put this long; at most this many
# unloads per hour cluster-wide (0: no limit); bundles or namespaces matching these shell
# patterns (comma-separated) never move.
FULCRUM_BUNDLE_COOL_DOWN_S = float(os.environ.get("FULCRUM_BUNDLE_COOL_DOWN_S", "60"))
FULCRUM_MAX_MOVES_PER_HOUR = int(os.environ.get("FULCRUM_MAX_MOVES_PER_HOUR", "0"))
FULCRUM_BLACKLIST = [p for p in os.environ.get("FULCRUM_BLACKLIST", "").split(",") if p]
# A broker that reported once and then stayed silent this long is lost: its bundles move.
FULCRUM_BROKER_TIMEOUT_S = float(os.environ.get("FULCRUM_BROKER_TIMEOUT_S", "60"))
# The config page's replay: a due tick records its snapshot at most every REPLAY_SAMPLE_S seconds,
# keeps REPLAY_WINDOW_S seconds of them, and records nothing over REPLAY_MAX_BUNDLES bundles (a
# replay answers within a request: about 1 s at 100 bundles, growing with the bundles).
FULCRUM_REPLAY_SAMPLE_S = float(os.environ.get("FULCRUM_REPLAY_SAMPLE_S", "30"))
FULCRUM_REPLAY_WINDOW_S = float(os.environ.get("FULCRUM_REPLAY_WINDOW_S", "3600"))
# The Pulsar page's evidence over the day: a snapshot every FULCRUM_REPLAY_DAY_SAMPLE_S seconds
# (5 min: 288 a day, replayed a cycle each), kept FULCRUM_EVIDENCE_DAY_S seconds.
FULCRUM_REPLAY_DAY_SAMPLE_S = float(os.environ.get("FULCRUM_REPLAY_DAY_SAMPLE_S", "300"))
FULCRUM_EVIDENCE_DAY_S = float(os.environ.get("FULCRUM_EVIDENCE_DAY_S", "86400"))
FULCRUM_REPLAY_MAX_BUNDLES = int(os.environ.get("FULCRUM_REPLAY_MAX_BUNDLES", "1000"))

SPARK_MASTER = os.environ.get("SPARK_MASTER", "local[*]")
SPARK_SUBMIT = os.environ.get("SPARK_SUBMIT", "spark-submit")
# The driver's heap (with local[*] the executors' too): 512m fits the demo; 2g for months of a
# thousand brokers (tests/benchmarks/spark_history.py).
SPARK_DRIVER_MEMORY = os.environ.get("SPARK_DRIVER_MEMORY", "512m")

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A task is acknowledged when it ends, not when it starts: a worker killed mid-task leaves it in
# Redis, which hands it to a worker again once the visibility timeout has passed.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
FULCRUM_TASK_VISIBILITY_S = float(os.environ.get("FULCRUM_TASK_VISIBILITY_S", "900"))
# kombu looks for such tasks every 5 s (its default, 10 s × every 10th sweep, is 100 s).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": FULCRUM_TASK_VISIBILITY_S,
    "unacked_restore_interval": 5,
    "unacked_restore_throttle": 1,
}
# Django's LOGGING governs the worker's logs too.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_ALWAYS_EAGER = _env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Spark and other long work run on their own queue and worker process, never in the shedding
# worker (which consumes only the default "celery" queue).
CELERY_TASK_ROUTES = {
    "console.tasks.report_run": {"queue": "reports"},
    # Compaction shares the reports worker (one task at a time): no Spark job reads a
    # partition while it is rewritten.
    "console.tasks.history_compact": {"queue": "reports"},
    # Observing a Pulsar cluster waits on its brokers: a worker of its own, never the shedding
    # loop's (celery -A console worker -Q pulsar --pool=solo).
    "console.tasks.pulsar_sync": {"queue": "pulsar"},
}
# Beat wakes the shedding tick this often; the tick itself runs every BalancerConfig.loop_interval_s
# (default 10 s: the demo's trace plays 30x faster than real time, so about five simulated
# minutes, where Pulsar sheds every minute). Changing the interval in the admin needs no restart.
FULCRUM_TICK_INTERVAL_S = float(os.environ.get("FULCRUM_TICK_INTERVAL_S", "5"))
# History is flushed from the database to Parquet once a minute: few, larger files.
FULCRUM_HISTORY_FLUSH_S = float(os.environ.get("FULCRUM_HISTORY_FLUSH_S", "60"))
# How long a report run's lease lasts (s): a run whose worker died is failed once it lapses.
FULCRUM_REPORT_RUN_LEASE_S = float(os.environ.get("FULCRUM_REPORT_RUN_LEASE_S", "60"))
# A real Pulsar cluster attached through its admin REST API (console.pulsar.admin), besides those
# added in the admin (PulsarConnection): any broker's (or a proxy's) web URL; the token of a
# superuser role is read from FULCRUM_PULSAR_TOKEN when used, never stored; a CA bundle (PEM)
# for https brokers. Empty URL: none from the environment.
FULCRUM_PULSAR_URL = os.environ.get("FULCRUM_PULSAR_URL", "")
FULCRUM_PULSAR_NAME = os.environ.get("FULCRUM_PULSAR_NAME", "pulsar")
FULCRUM_PULSAR_TLS_CA = os.environ.get("FULCRUM_PULSAR_TLS_CA", "")
# The local cluster's name; empty: the one the brokers give (their clusterName). Never guessed
# from /admin/v2/clusters, which lists every cluster of a geo-replicated deployment.
FULCRUM_PULSAR_CLUSTER = os.environ.get("FULCRUM_PULSAR_CLUSTER", "")
# Other ways to authenticate than FULCRUM_PULSAR_TOKEN (one of them; console.pulsar.auth): a file
# holding the token, re-read when it changes; OAuth2 client credentials as Pulsar's
# AuthenticationOAuth2 (issuer URL, audience, key file with client_id and client_secret, scope).
# And/or a TLS client certificate and its key (PEM).
FULCRUM_PULSAR_TOKEN_FILE = os.environ.get("FULCRUM_PULSAR_TOKEN_FILE", "")
FULCRUM_PULSAR_OAUTH2_ISSUER_URL = os.environ.get("FULCRUM_PULSAR_OAUTH2_ISSUER_URL", "")
FULCRUM_PULSAR_OAUTH2_AUDIENCE = os.environ.get("FULCRUM_PULSAR_OAUTH2_AUDIENCE", "")
FULCRUM_PULSAR_OAUTH2_KEY_FILE = os.environ.get("FULCRUM_PULSAR_OAUTH2_KEY_FILE", "")
FULCRUM_PULSAR_OAUTH2_SCOPE = os.environ.get("FULCRUM_PULSAR_OAUTH2_SCOPE", "")
FULCRUM_PULSAR_TLS_CERT = os.environ.get("FULCRUM_PULSAR_TLS_CERT", "")
FULCRUM_PULSAR_TLS_KEY = os.environ.get("FULCRUM_PULSAR_TLS_KEY", "")
# Admin calls in flight at once (per pass), a read call's timeout, and how long a fan-out over
# every broker (owned bundles, load reports) waits before it goes on without the slow ones (s).
FULCRUM_PULSAR_CONCURRENCY = int(os.environ.get("FULCRUM_PULSAR_CONCURRENCY", "8"))
FULCRUM_PULSAR_READ_TIMEOUT_S = float(os.environ.get("FULCRUM_PULSAR_READ_TIMEOUT_S", "10"))
FULCRUM_PULSAR_DEADLINE_S = float(os.environ.get("FULCRUM_PULSAR_DEADLINE_S", "30"))
# The dead-man (manage.py deadman, its own process): while Fulcrum controls a Pulsar cluster and
# the shedding loop has completed no tick for this long, control goes back to Pulsar (its
# shedding on again, exactly as a release). Empty: 10 loop intervals. Checked every
# FULCRUM_DEADMAN_CHECK_S.
FULCRUM_DEADMAN_S = (
    float(os.environ["FULCRUM_DEADMAN_S"]) if os.environ.get("FULCRUM_DEADMAN_S") else None
)
FULCRUM_DEADMAN_CHECK_S = float(os.environ.get("FULCRUM_DEADMAN_CHECK_S", "5"))
# When the dead-man cannot read the database either: give control back from what it remembers
# once the loop's silence passes the limit (off: it waits for the database; on, a dead-man cut
# off alone from the database would hand control back while the loop still runs).
FULCRUM_DEADMAN_WITHOUT_DATABASE = _env_bool("FULCRUM_DEADMAN_WITHOUT_DATABASE", False)
# How old a completed unload may be and still be undone by an operator (back to the broker it
# left, through the same vetoes), seconds.
FULCRUM_UNDO_WINDOW_S = float(os.environ.get("FULCRUM_UNDO_WINDOW_S", "3600"))
# Prometheus' scrape of /metrics: when set, only with "Authorization: Bearer <token>"; without
# a token /metrics answers 403 unless FULCRUM_METRICS_PUBLIC=1 (the figures name brokers,
# bundles' counts and operators' activity: not for anyone who can reach the port).
FULCRUM_METRICS_TOKEN = os.environ.get("FULCRUM_METRICS_TOKEN", "")
FULCRUM_METRICS_PUBLIC = _env_bool("FULCRUM_METRICS_PUBLIC", False)
# The demo only: take control of the cluster from the environment once, at its first observation
# (audited as the balancer's), as an admin would on the Pulsar page.
FULCRUM_PULSAR_TAKE_CONTROL_AT_START = os.environ.get("FULCRUM_PULSAR_TAKE_CONTROL_AT_START") == "1"
# When an observation finds Pulsar's own shedding (or auto-split) back on while Fulcrum holds
# control, the executor stops at once; with this on, Fulcrum also sets it off again (audited)
# and goes on; off, it stays stopped until an admin re-asserts control or releases it.
FULCRUM_PULSAR_REASSERT = _env_bool("FULCRUM_PULSAR_REASSERT", False)
# How often the attached cluster is observed (and the moves sent to it verified).
FULCRUM_PULSAR_OBSERVE_S = float(os.environ.get("FULCRUM_PULSAR_OBSERVE_S", "15"))
CELERY_BEAT_SCHEDULE = {
    "shedding-tick": {"task": "console.tasks.shedding_tick", "schedule": FULCRUM_TICK_INTERVAL_S},
    "history-flush": {"task": "console.tasks.history_flush", "schedule": FULCRUM_HISTORY_FLUSH_S},
    "report-runs-reap": {"task": "console.tasks.report_runs_reap", "schedule": 60.0},
    "history-compact": {
        "task": "console.tasks.history_compact",
        "schedule": FULCRUM_HISTORY_COMPACT_S,
    },
    "load-reports-fold": {"task": "console.tasks.load_reports_fold", "schedule": 5.0},
    "optimality-measure": {
        "task": "console.tasks.optimality_measure",
        "schedule": float(os.environ.get("FULCRUM_OPTIMALITY_S", "60")),
    },
}

# Observe the attached Pulsar cluster, send and verify its moves (a no-op with none attached);
# a pass that waited past the next one is dropped.
CELERY_BEAT_SCHEDULE["pulsar-sync"] = {
    "task": "console.tasks.pulsar_sync",
    "schedule": FULCRUM_PULSAR_OBSERVE_S,
    "options": {"expires": FULCRUM_PULSAR_OBSERVE_S},
}


def _refusal_said(record: logging.LogRecord) -> bool:
    """A 403 or 404 (a viewer on an admin's page, an unknown path) is one line in the log,
    Django's "Forbidden (Permission denied): /users/", not that line and a traceback (Django
    5.2 logs it with ``exc_info=exception``: ``django.utils.log.log_response``, called from
    ``django.core.handlers.exception.response_for_exception``)."""
    if record.exc_info and isinstance(record.exc_info[1], PermissionDenied | Http404):
        record.exc_info = None
        record.exc_text = None
    return True


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "refusal_said": {"()": "django.utils.log.CallbackFilter", "callback": _refusal_said}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["refusal_said"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("FULCRUM_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        # One line per admin call to Pulsar is too many: its refusals are logged by Fulcrum.
        "httpx": {"level": "WARNING"},
    },
}
