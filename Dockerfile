# syntax=docker/dockerfile:1
# One image for every schedd service; the command selects it:
#   docker run IMAGE schedd-api | schedd-scheduler | schedd-registry | schedd-worker | schedd-migrate | schedd-etcd-setup | schedctl
# Build: docker build -t schedd:0.1.0 .   (docs/deploy.md)
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- build: the schedd wheel and the wheels of all its dependencies ---------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY libs ./libs
COPY services ./services
RUN pip wheel --wheel-dir /wheels .

# --- runtime: the installed wheels, no compilers, no build tools, a non-root user -------------------
FROM ${PYTHON_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# tini is PID 1: it forwards SIGTERM to the service (a worker drains on it) and reaps the orphaned
# processes of shell tasks.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels schedd
# Every service's command is installed (tests/deploy/test_image.py keeps this list equal to
# pyproject's [project.scripts], less the local development stack).
RUN for command in schedctl schedd-api schedd-etcd-setup schedd-migrate schedd-probe schedd-registry schedd-scheduler schedd-worker; do \
        command -v "$command" >/dev/null || { echo "missing: $command" >&2; exit 1; }; \
    done
RUN groupadd --system --gid 10001 schedd \
    && useradd --system --uid 10001 --gid schedd --home-dir /app --create-home --shell /usr/sbin/nologin schedd
# Workers import Python tasks from their working directory: an image FROM this one adds its task
# modules under /app.
WORKDIR /app
ENV PYTHONPATH=/app
USER 10001:10001
EXPOSE 50051 50052 9100
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["schedd-api"]
