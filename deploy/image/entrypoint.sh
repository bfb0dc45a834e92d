#!/bin/sh
# The image's entry point: one role per container, named by the first argument.
#   web           pages and the REST API: gunicorn, WSGI (portal.wsgi), WEB_WORKERS processes
#                 of WEB_THREADS threads each
#   ws            websockets and the agents' endpoint: uvicorn, ASGI (portal.asgi)
#   controller    the scheduling and Kubernetes controller (one leader, others stand by)
#   worker        the Celery worker
#   agent         the node agent of a GPU node (NVML), posting to the portal
#   manage ...    a management command: migrate, createsuperuser, node_token, audit_verify
# Further arguments go to the role's command.
set -eu

role="${1:-web}"
[ "$#" -gt 0 ] && shift

case "$role" in
web)
    # A synchronous view holds a thread for its request: threads let one process serve several
    # at once, where ASGI runs every synchronous view of a process on one thread. The heartbeat
    # files go to memory, not to a disk that may stall them. Client addresses and the scheme
    # come from the proxy's headers, read by the portal itself (TRUSTED_PROXY_COUNT,
    # SECURE_PROXY_SSL_HEADER). The keep-alive outlasts the proxy's, which closes first.
    exec gunicorn portal.wsgi:application --bind "${HOST:-0.0.0.0}:${PORT:-8000}" \
        --workers "${WEB_WORKERS:-2}" --worker-class gthread --threads "${WEB_THREADS:-8}" \
        --worker-tmp-dir /dev/shm --keep-alive 75 --log-level warning "$@"
    ;;
ws)
    # The long-lived connections: uvicorn must not rewrite the proxy's headers before the
    # portal reads them.
    exec uvicorn portal.asgi:application --host "${HOST:-0.0.0.0}" --port "${PORT:-8000}" \
        --workers "${WEB_WORKERS:-2}" --lifespan off --no-proxy-headers --no-server-header \
        --no-access-log --log-level warning "$@"
    ;;
controller)
    exec python manage.py controller "$@"
    ;;
worker)
    exec celery -A portal worker --loglevel "${LOG_LEVEL:-INFO}" \
        --concurrency "${WORKER_CONCURRENCY:-2}" "$@"
    ;;
agent)
    : "${PORTAL_URL:?PORTAL_URL: the portal's base URL the agent posts to}"
    : "${NODE_NAME:?NODE_NAME: this node's Kubernetes name}"
    exec python -m agent --portal "$PORTAL_URL" --node "$NODE_NAME" \
        --token-file "${NODE_TOKEN_FILE:-/run/secrets/node-tokens/$NODE_NAME}" "$@"
    ;;
manage)
    exec python manage.py "$@"
    ;;
*)
    echo "unknown role '$role': expected web, ws, controller, worker, agent or manage" >&2
    exit 64
    ;;
esac
