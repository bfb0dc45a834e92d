# syntax=docker/dockerfile:1
# One image for every role (web, ws, controller, worker, agent): see deploy/image/entrypoint.sh.
#   docker build -t gpu-portal:VERSION .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# -- build: compilers for any dependency without a wheel, only in this stage ----------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
COPY requirements.txt /tmp/requirements.txt
RUN /opt/venv/bin/pip install -r /tmp/requirements.txt
# The scheduler compiled by mypyc, about 1.5 x faster a cycle (docs/decisions/0011); CI checks it
# decides as its source does (tests/scheduler/test_compiled.py). mypy stays in this stage.
COPY requirements-dev.txt /tmp/requirements-dev.txt
RUN python -m venv /opt/mypyc \
    && /opt/mypyc/bin/pip install "$(grep '^mypy==' /tmp/requirements-dev.txt)"
COPY scheduler /src/scheduler
RUN cd /src && /opt/mypyc/bin/mypyc scheduler/ && rm -rf build .mypy_cache

# -- run: the interpreter, the virtual environment, the code and its collected static files -------
FROM ${PYTHON_IMAGE} AS run
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=portal.settings \
    PORTAL_VAR_DIR=/app/var
RUN groupadd --system --gid 10001 portal \
    && useradd --system --uid 10001 --gid portal --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin portal \
    && install -d -o portal -g portal /var/lib/portal/audit
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY . .
COPY --from=build /src/*.so /app/
COPY --from=build /src/scheduler/*.so /app/scheduler/
# Byte-compiled and collected at build: at run time the root file system may be read-only
# (the translation catalogues are committed compiled).
RUN python -m compileall -q -j 0 /app \
    && python manage.py collectstatic --noinput --verbosity 0
USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["/bin/sh", "/app/deploy/image/entrypoint.sh"]
CMD ["web"]
