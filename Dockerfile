# syntax=docker/dockerfile:1
# One image for every schedd service; the command selects it:
#   docker run IMAGE schedd-api | schedd-scheduler | schedd-registry | schedd-worker | schedd-migrate | schedd-etcd-setup | schedd-web | schedctl
# Build: docker build -t schedd:0.1.0 .   (docs/deploy.md; `make images` builds it with podman)
# PYTHON_IMAGE is the base of both stages: the public Python image, or any Debian-based image with
# python, pip and apt-get (make images uses one made from Debian's packages).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- build: the wheels of the dependencies, then the wheel of schedd ---------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first: this layer is rebuilt only when pyproject.toml changes, not on a code change.
COPY pyproject.toml ./
RUN --mount=type=cache,target=/root/.cache/pip \
    python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
        > requirements.txt \
    && pip wheel --wheel-dir /wheels/deps -r requirements.txt \
    && cp requirements.txt /wheels/deps/ \
    && cd /wheels/deps && sha256sum ./*.whl requirements.txt > /wheels/deps.sha256
COPY README.md ./
COPY libs ./libs
COPY services ./services
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --no-deps --wheel-dir /wheels/app . \
    && cd /wheels/app && sha256sum ./*.whl > /wheels/app.sha256

# --- runtime: the installed wheels, no compilers, no build tools, a non-root user -------------------
FROM ${PYTHON_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# tini is PID 1: it forwards SIGTERM to the service (a worker drains on it) and reaps the orphaned
# processes of shell tasks.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 schedd \
    && useradd --system --uid 10001 --gid schedd --home-dir /app --create-home --shell /usr/sbin/nologin schedd
# The wheels are mounted, not copied, so that they stay out of the image's layers. Each install
# follows a COPY of the wheels' digests: a builder that does not key its cache on a mount's content
# (podman's) still installs again whenever the wheels changed.
COPY --from=build /wheels/deps.sha256 /usr/local/share/schedd/
RUN --mount=type=bind,from=build,source=/wheels/deps,target=/wheels \
    pip install --no-index --find-links /wheels -r /wheels/requirements.txt
COPY --from=build /wheels/app.sha256 /usr/local/share/schedd/
RUN --mount=type=bind,from=build,source=/wheels/app,target=/wheels \
    pip install --no-index --no-deps /wheels/*.whl
# Every service's command is installed (tests/deploy/test_image.py keeps this list equal to
# pyproject's [project.scripts]; the development stack is devtools/'s, never copied here).
RUN for command in schedctl schedd-api schedd-etcd-setup schedd-migrate schedd-probe schedd-registry schedd-scheduler schedd-web schedd-worker; do \
        command -v "$command" >/dev/null || { echo "missing: $command" >&2; exit 1; }; \
    done
# Workers import Python tasks from their working directory: an image FROM this one adds its task
# modules under /app.
WORKDIR /app
ENV PYTHONPATH=/app
USER 10001:10001
EXPOSE 50051 50052 9100
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["schedd-api"]
