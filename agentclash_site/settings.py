"""Settings, driven entirely by environment variables (spec/interfaces.md §1).

Every variable is parsed strictly: a malformed value stops start-up with a message that
names the variable. ``.env.example`` documents each one.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentclash_site.lib.env import (
    ConfigError,
    env_base_url,
    env_bool,
    env_broker_url,
    env_class_path,
    env_float,
    env_int,
    env_json_object,
    env_list,
    env_log_level,
    env_text,
    parse_database_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG", True)

_DEV_SECRET_KEY = "django-insecure-agentclash-development-key-do-not-use-in-production"
_DEV_FIELD_KEY = "YWdlbnRjbGFzaC1kZXYta2V5LW5vdC1mb3ItcHJvZCE="  # development only

SECRET_KEY = os.environ.get("SECRET_KEY", "").strip()
if not SECRET_KEY:
    if not DEBUG:
        raise ConfigError(
            "SECRET_KEY is required when DEBUG is false: set SECRET_KEY to a long random string "
            '(python -c "import secrets; print(secrets.token_urlsafe(50))")'
        )
    SECRET_KEY = _DEV_SECRET_KEY

FIELD_ENCRYPTION_KEY = os.environ.get("FIELD_ENCRYPTION_KEY", "").strip()
if not FIELD_ENCRYPTION_KEY:
    if not DEBUG:
        raise ConfigError(
            "FIELD_ENCRYPTION_KEY is required when DEBUG is false: set it to a Fernet key "
            '(python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())")'
        )
    FIELD_ENCRYPTION_KEY = _DEV_FIELD_KEY
else:
    from agentclash_site.lib.crypto import validate_fernet_key

    validate_fernet_key(FIELD_ENCRYPTION_KEY, name="FIELD_ENCRYPTION_KEY")
# Earlier keys, comma-separated: they still decrypt (manage.py encryption rotate re-encrypts).
FIELD_ENCRYPTION_KEY_FALLBACKS = env_list("FIELD_ENCRYPTION_KEY_FALLBACKS", [])
if FIELD_ENCRYPTION_KEY_FALLBACKS:
    from agentclash_site.lib.crypto import validate_fernet_key

    for _key in FIELD_ENCRYPTION_KEY_FALLBACKS:
        validate_fernet_key(_key, name="each entry of FIELD_ENCRYPTION_KEY_FALLBACKS")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1"])
PUBLIC_BASE_URL = env_base_url("PUBLIC_BASE_URL", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from static/, never a CDN
    "agentclash_site.workspaces",
    "packs",
    "runs",
    "grading",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "agentclash_site.lib.middleware.ContentSecurityPolicyMiddleware",
    "agentclash_site.lib.middleware.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "agentclash_site.lib.middleware.HtmxSessionEndedMiddleware",
    "agentclash_site.workspaces.middleware.CurrentWorkspaceMiddleware",
]

ROOT_URLCONF = "agentclash_site.urls"
WSGI_APPLICATION = "agentclash_site.wsgi.application"

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
                "agentclash_site.workspaces.context_processors.workspaces",
            ],
            "builtins": ["agentclash_site.workspaces.templatetags.names"],
        },
    }
]

DATABASES = {
    "default": parse_database_url(
        os.environ.get("DATABASE_URL", "").strip() or "sqlite:///var/db.sqlite3", base_dir=BASE_DIR
    )
}
# Concurrent helpers and CI jobs can each pick their own test database name.
if os.environ.get("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["TEST_DATABASE_NAME"]}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_text("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
MEDIA_ROOT = Path(env_text("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"
STORAGES = {
    "default": {
        "BACKEND": env_class_path("DEFAULT_FILE_STORAGE", "django.core.files.storage.FileSystemStorage"),
        # Backend options as a JSON object, e.g. {"bucket_name": "agentclash", "endpoint_url": "..."}
        # for django-storages' S3Storage; credentials come from the backend's own variables.
        "OPTIONS": env_json_object("DEFAULT_FILE_STORAGE_OPTIONS", {}),
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Uploads: the 60 MiB transport limit of pack-format §3 (bundles are read whole).
DATA_UPLOAD_MAX_MEMORY_SIZE = 60 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

# --- Security: everything strict follows from DEBUG=false; each can be overridden. ----
_secure = not DEBUG
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _secure)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _secure)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _secure)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if _secure else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", _secure)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", _secure)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Scripts from this origin only. Styles may be inline (htmx adds its indicator style; the
# vendored API docs style themselves); Redoc runs its search in a blob: worker.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SESSION_COOKIE_HTTPONLY = True
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
for _origin in CSRF_TRUSTED_ORIGINS:
    if "://" not in _origin:
        raise ConfigError(
            f"CSRF_TRUSTED_ORIGINS entries must start with a scheme, such as https://{_origin}, got {_origin!r}"
        )
if env_bool("USE_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- REST API ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agentclash_site.workspaces.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "agentclash_site.lib.api.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "agentclash_site.lib.parsers.JSONParser",  # a too-deeply nested body is a 400, not a 500
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "AgentClash API",
    "DESCRIPTION": "Challenge packs, deployments, runs and graded results.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Deep links make each operation's path a link inside its expand button: a control nested
    # in a control, which screen readers announce badly (axe: nested-interactive).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agentclash_site.lib.openapi.document_error_responses",
    ],
}

# --- Celery -----------------------------------------------------------------------------
_broker_dir = VAR_DIR / "broker"
# How often a worker on the filesystem broker looks at the queue folder when it found nothing
# to take. With kombu's default (1 s) and prefetch 1 it took at most one task a second: every
# task of a run (dispatch slices, probe, check, summary) waited up to a second, and a run
# created after the demo's waited ~13 s behind the demo's tasks (bench/sqlite_stack.py).
FILESYSTEM_BROKER_POLL_SECONDS = 0.1
CELERY_BROKER_URL = env_broker_url("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        "polling_interval": FILESYSTEM_BROKER_POLL_SECONDS,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Unacked tasks come back after this long if a worker vanished (acks_late).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 900)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 960)
if CELERY_TASK_TIME_LIMIT and CELERY_TASK_SOFT_TIME_LIMIT >= CELERY_TASK_TIME_LIMIT:
    # The soft limit lets a task give back what it holds before the hard one kills its process.
    raise ConfigError(
        f"CELERY_TASK_SOFT_TIME_LIMIT ({CELERY_TASK_SOFT_TIME_LIMIT}) must be less than "
        f"CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT}): lower the soft limit or raise the hard one"
    )
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = "UTC"
# The runs recovery sweeper (runs.sweeper): expired claims, lost dispatchers, closable runs.
RUNS_SWEEP_SECONDS = env_float("RUNS_SWEEP_SECONDS", 30, positive=True)
# Grace after an item's own deadline before the sweeper takes its claim back.
RUNS_CLAIM_MARGIN_SECONDS = env_float("RUNS_CLAIM_MARGIN_SECONDS", 60)
# One lane-dispatch task's time slice, and the margin of its lease past the slice.
RUNS_DISPATCH_SLICE_SECONDS = env_float("RUNS_DISPATCH_SLICE_SECONDS", 20, positive=True)
RUNS_LEASE_MARGIN_SECONDS = env_float("RUNS_LEASE_MARGIN_SECONDS", 30)
CELERY_BEAT_SCHEDULE = {
    "runs-sweep": {"task": "runs.sweep", "schedule": RUNS_SWEEP_SECONDS},
}

# --- Judges (defaults for the offline `grade` command's --judge-* flags) ------------
AGENTCLASH_JUDGE_PROVIDER = os.environ.get("AGENTCLASH_JUDGE_PROVIDER", "").strip() or None
AGENTCLASH_JUDGE_BASE_URL = os.environ.get("AGENTCLASH_JUDGE_BASE_URL", "").strip() or None
AGENTCLASH_JUDGE_API_KEY = os.environ.get("AGENTCLASH_JUDGE_API_KEY", "").strip() or None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_log_level("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

if os.environ.get("AGENTCLASH_TESTING") == "1":
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Steps of `manage.py demo setup` after the demo user and workspace, in order.
AGENTCLASH_DEMO_STEPS: list[str] = []
AGENTCLASH_DEMO_STEPS.append("packs.demo.setup")
AGENTCLASH_DEMO_STEPS.append("grading.demo.setup")
AGENTCLASH_DEMO_STEPS.append("runs.demo.setup")
