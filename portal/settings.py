"""One settings module, driven by the environment.

With nothing set, the portal runs on its embedded defaults: SQLite under var/, the in-memory
channel layer, a local-memory cache and eager Celery. DATABASE_URL and REDIS_URL switch to
PostgreSQL and Redis. PORTAL_MODE=production refuses to start with the demo secrets.
"""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_int, env_list, env_secret, env_str
from portal.logs import init_sentry

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(BASE_DIR / "var")))
(VAR_DIR / "staticfiles").mkdir(parents=True, exist_ok=True)

DEMO_SECRET_KEY = "demo-insecure-secret-key-change-me"
DEMO_AUDIT_KEY = "demo-insecure-audit-key-change-me"

PORTAL_MODE = env_str("PORTAL_MODE", "demo")
if PORTAL_MODE not in {"demo", "production"}:
    raise ImproperlyConfigured(f"PORTAL_MODE: expected demo or production, got {PORTAL_MODE!r}")
PRODUCTION = PORTAL_MODE == "production"

SECRET_KEY = env_secret("SECRET_KEY", DEMO_SECRET_KEY)
# The audit chain is keyed with a secret kept outside the database, so whoever can write the
# database still cannot forge a valid chain.
AUDIT_KEY = env_secret("AUDIT_KEY", DEMO_AUDIT_KEY)
# Bearer token Prometheus scrapes /metrics with; unset, /metrics does not exist (404).
METRICS_TOKEN = env_secret("METRICS_TOKEN", "")
if PRODUCTION:
    for name, value, demo in (
        ("SECRET_KEY", SECRET_KEY, DEMO_SECRET_KEY),
        ("AUDIT_KEY", AUDIT_KEY, DEMO_AUDIT_KEY),
    ):
        if value == demo or len(value) < 32:
            raise ImproperlyConfigured(
                f"{name}: production mode needs a secret of at least 32 characters, "
                "not the demo default (set it or {name}_FILE)"
            )

# Signed checkpoints of the audit chain, appended where the database cannot rewrite them (a
# volume the database's users cannot write): a truncated tail is found against the latest.
AUDIT_CHECKPOINT_FILE = Path(
    env_str("AUDIT_CHECKPOINT_FILE", str(VAR_DIR / "audit-checkpoints.jsonl"))
)

# Tracebacks in the browser only for a developer who asks (DEBUG=1); everyone else, the demo
# included, gets the portal's error pages (portal/errors.py).
DEBUG = env_bool("DEBUG", default=False)
ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "testserver"]
)
if PRODUCTION and not ALLOWED_HOSTS:
    raise ImproperlyConfigured(
        "ALLOWED_HOSTS: production mode needs the host names the portal answers to "
        "(comma-separated)"
    )
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "base",
    "portal",
    "tenants",
    "quotas",
    "jobs",
    "audit",
    "cluster",
    "notifications",
    "monitoring",
    "billing",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "base.middleware.RequestContextMiddleware",
    "base.middleware.RefuseUnreadableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # After sessions, before common: the language from the session, cookie or Accept-Language.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "tenants.language.UserLanguageMiddleware",  # a signed-in user's stored language (no cookie)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # After authentication: a repeated key is its user's. Runs the view in its transaction.
    "base.idempotency.IdempotencyMiddleware",
    # Last, as django-axes asks: it turns a login refused for lockout into its answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"  # the web role: pages and the REST API
ASGI_APPLICATION = "portal.asgi.application"  # the ws role: websockets, the agents' endpoint

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
                "tenants.context.memberships",
                "tenants.oidc.sign_in_options",
            ],
        },
    },
]


def _database() -> dict[str, object]:
    url = env_str("DATABASE_URL")
    if url:
        config: dict[str, object] = dict(dj_database_url.parse(url))
        if config["ENGINE"] == "django.db.backends.postgresql":
            # Under ASGI each request may run on another thread, so persistent per-thread
            # connections pile up; a pool shares a bounded set instead.
            config["OPTIONS"] = {
                "pool": {"min_size": 1, "max_size": env_int("DB_POOL_SIZE", 8), "timeout": 10},
                # Values travel apart from the statement, and a statement run DB_PREPARE_AFTER
                # times on a connection is prepared there: PostgreSQL then neither parses nor
                # plans it again. A submission cost the server a third less. 0 turns preparing
                # off, for poolers that cannot carry prepared statements.
                "server_side_binding": True,
                "prepare_threshold": env_int("DB_PREPARE_AFTER", 5) or None,
            }
            # The pool checks a connection before lending it (an empty statement): one that
            # PostgreSQL dropped (a restart, a failover) is replaced, not handed to a request.
            config["CONN_HEALTH_CHECKS"] = True
        return config
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": VAR_DIR / "portal.sqlite3",
        "OPTIONS": {
            # Web and controller write side by side in the demo: WAL lets readers go on while
            # one writes, IMMEDIATE takes the write lock up front instead of failing mid-way.
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        "TEST": {"NAME": VAR_DIR / "test.sqlite3"},
    }


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "base.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "portal"),
            # A Redis that does not answer costs a request this long at most, and only once
            # per base.outage.RETRY_S: meanwhile the cache serves from memory.
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "base.channel_layer.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout, the same as channels_redis's
                # blocking pop: an idle consumer's read would time out and kill it. Its pool
                # also refuses a 101st connection at once, which 1,000 sockets closing reach.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": 30,
                        "socket_connect_timeout": 1,  # a websocket's connect waits on it
                        "max_connections": 2000,
                    }
                ],
                "prefix": env_str("CHANNEL_PREFIX", "portal"),
                # Every websocket of a web process shares one Redis key ("specific.<process>!"):
                # the default 100 would drop messages for all of them at a short stall. Each
                # consumer still keeps at most 100 in the process (and drains them at once).
                "channel_capacity": {"specific.*": 20_000},
            },
        }
    }
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
    CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
# Celery tasks the leading controller enqueues every so many seconds (there is no beat: the
# controller is the only clock; cluster.duties.periodic_tasks).
PERIODIC_TASKS = {
    "monitoring.tasks.prune_old_rollups": 3600,
    "billing.tasks.finalise_statements": 3600,  # a month's statements once it has ended
}
# Mail for notifications (notifications/): the console in the demo; SMTP and the rest through
# Django's EMAIL_* settings in production.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
# The scheduling policy (fifo, fair or capacity): the controller's and the dry run's.
SCHEDULER_POLICY = env_str("SCHEDULER_POLICY", "fair")
# The controller's /healthz and /readyz (cluster/probes.py); 0 serves none.
CONTROLLER_PROBE_PORT = env_int("CONTROLLER_PROBE_PORT", 8081)
# The most member jobs one sweep may have (submitted in one request and one transaction).
SWEEP_MAX_MEMBERS = env_int("SWEEP_MAX_MEMBERS", 1000)
# The most jobs one quota what-if replays (cluster/whatif.py): a window with more is refused.
WHATIF_MAX_JOBS = env_int("WHATIF_MAX_JOBS", 50_000)
# The currency of prices, statements and budgets (ISO 4217).
BILLING_CURRENCY = env_str("BILLING_CURRENCY", "CNY")
# Idle jobs (monitoring/idle.py), for teams without a policy of their own: a running job whose
# GPUs all stay under IDLE_UTIL_PCT % for IDLE_MINUTES, never counting its first
# IDLE_FIRST_MINUTES, is idle and its owner told; a team's policy may stop it
# IDLE_STOP_GRACE_MINUTES after that. IDLE_UTIL_PCT is also the right-sizing hint's "used".
IDLE_UTIL_PCT = env_int("IDLE_UTIL_PCT", 5)
IDLE_MINUTES = env_int("IDLE_MINUTES", 30)
IDLE_FIRST_MINUTES = env_int("IDLE_FIRST_MINUTES", 10)
IDLE_STOP_GRACE_MINUTES = env_int("IDLE_STOP_GRACE_MINUTES", 30)

# The lockout backend goes first: a locked-out username and address is refused before the
# password is checked (the login form and the token endpoint alike).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Single sign-on with the organisation's OpenID Connect provider (tenants/oidc.py), beside local
# accounts: on once OIDC_RP_CLIENT_ID is set. Who may come in, and into which team, is the
# claim mappings' decision (ClaimMapping, in the admin).
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_TEAM_CLAIM = env_str("OIDC_TEAM_CLAIM", "groups")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT", 10)  # seconds for each call to the provider
LOGIN_REDIRECT_URL_FAILURE = LOGIN_URL  # a refusal's reason is shown there
if OIDC_ENABLED:
    needed = {
        "OIDC_RP_CLIENT_SECRET": OIDC_RP_CLIENT_SECRET,
        "OIDC_OP_AUTHORIZATION_ENDPOINT": OIDC_OP_AUTHORIZATION_ENDPOINT,
        "OIDC_OP_TOKEN_ENDPOINT": OIDC_OP_TOKEN_ENDPOINT,
        "OIDC_OP_USER_ENDPOINT": OIDC_OP_USER_ENDPOINT,
        "OIDC_OP_JWKS_ENDPOINT": OIDC_OP_JWKS_ENDPOINT,
    }
    missing = [name for name, value in needed.items() if not value]
    if missing:
        raise ImproperlyConfigured(
            f"{', '.join(missing)}: needed for single sign-on, as OIDC_RP_CLIENT_ID is set"
        )
    AUTHENTICATION_BACKENDS.append("tenants.oidc.OrganisationBackend")

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"  # collectstatic target in production
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Behind a proxy that ends TLS, the request reaches the portal as plain HTTP: the proxy names
# the scheme in this header (e.g. X-Forwarded-Proto), which must be one it always sets itself.
if env_str("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = (
        "HTTP_" + env_str("SECURE_PROXY_SSL_HEADER").upper().replace("-", "_"),
        "https",
    )
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
# Pages run only the portal's own static scripts and styles: no inline code, no other origin.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "img-src": [SELF, "data:"],  # the API docs' icons are data: URIs
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# How many reverse proxies in front of the portal append to X-Forwarded-For. The client is the
# address the outermost of them saw; with 0 the header is ignored, since any client can send it.
# Throttles, the login lockout and the audit trail all read the client's address this way.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0)

# Password guessing: a username is locked out from one address after LOGIN_FAILURE_LIMIT wrong
# passwords in a row (login form and token endpoint together), for LOGIN_COOLOFF_MINUTES.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "base.client_ip.client_ip"
AXES_LOCKOUT_CALLABLE = "base.lockout.lockout_response"
AXES_DISABLE_ACCESS_LOG = True  # successful logins are in the audit trail already

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # The browsable API is a demo convenience; production answers JSON only.
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        *([] if PRODUCTION else ["rest_framework.renderers.BrowsableAPIRenderer"]),
    ],
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "DEFAULT_PAGINATION_CLASS": "base.rest.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "tenants.tokens.TokenRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("THROTTLE_ANON", "60/min"),
        "token": env_str("THROTTLE_TOKEN", "30000/min"),
    },
    "DEFAULT_PARSER_CLASSES": [
        "base.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "base.rest.exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU cluster portal API",
    "DESCRIPTION": "Submit and follow GPU jobs; manage teams, quotas, queues; read the audit.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "jobs.models.State",
        "AlertStateEnum": "monitoring.models.AlertState",
        "IncidentStateEnum": "monitoring.models.IncidentState",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "base.schema.add_shared_answers",
    ],
}

# One-minute GPU roll-ups older than this are pruned (monitoring.retention.prune_rollups).
METRICS_RETENTION_DAYS = env_int("METRICS_RETENTION_DAYS", 30)
# Every node's health inspection (monitoring.inspections): how often the leading controller
# runs one, and how long runs and their results are kept.
INSPECTION_EVERY_MINUTES = env_int("INSPECTION_EVERY_MINUTES", 30)
INSPECTION_RETENTION_DAYS = env_int("INSPECTION_RETENTION_DAYS", 30)
if INSPECTION_EVERY_MINUTES < 1 or INSPECTION_RETENTION_DAYS < 1:
    raise ImproperlyConfigured("INSPECTION_EVERY_MINUTES and INSPECTION_RETENTION_DAYS: at least 1")

# The priorities a team's queue may have (admins and leads alike): each becomes a cluster-wide
# PriorityClass, and Kubernetes allows user classes up to 1e9 only.
QUEUE_PRIORITY_MIN = env_int("QUEUE_PRIORITY_MIN", -1000)
QUEUE_PRIORITY_MAX = env_int("QUEUE_PRIORITY_MAX", 1000)
# Kubernetes namespace of a team: "<prefix>-<slug>".
NAMESPACE_PREFIX = env_str("NAMESPACE_PREFIX", "gpu")
API_TOKEN_PREFIX = "gpt"

# One JSON object per log line in production (request id, user, team: portal/logs.py).
LOG_FORMAT = env_str("LOG_FORMAT", "json" if PRODUCTION else "plain")
if LOG_FORMAT not in {"json", "plain"}:
    raise ImproperlyConfigured(f"LOG_FORMAT: expected json or plain, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"structured": {"()": "portal.logs.formatter", "log_format": LOG_FORMAT}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
# Errors go to Sentry too when a DSN is given; nothing is sent without one.
SENTRY_DSN = env_secret("SENTRY_DSN", "")
if SENTRY_DSN:
    init_sentry(
        SENTRY_DSN,
        environment=env_str("SENTRY_ENVIRONMENT", PORTAL_MODE),
        release=env_str("SENTRY_RELEASE"),
    )

# Controller: how often a job lost with its node is requeued before it is failed.
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 3)
# The cluster: a kubeconfig file; empty means ~/.kube/config, then in-cluster config.
KUBECONFIG = env_str("KUBECONFIG")
