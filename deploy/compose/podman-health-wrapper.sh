#!/bin/sh
# podman for podman-compose (--podman-path) with podman older than 4.6, which runs health checks only
# through systemd timers and has no `wait --condition=healthy`: this reports version 4.6.0, so that
# podman-compose honours `depends_on: condition: service_healthy` and `up --wait`, and implements
# `wait --condition=healthy NAME...` by running each container's health check until it passes.
# It drops `--requires` from `create` and `run`: podman 4.3 cannot start a container that requires
# one whose own requirement has exited, and podman-compose enforces `depends_on` itself.
# Everything else goes to podman unchanged. PODMAN (default podman) names the real one;
# HEALTH_WAIT_TIMEOUT (seconds, default 300) bounds the wait.
set -eu
podman=${PODMAN:-podman}
case "${1:-}" in
--version | version)
    echo "podman version 4.6.0"
    exit 0
    ;;
wait)
    if [ "${2:-}" = --condition=healthy ]; then
        shift 2
        [ "${1:-}" = --ignore ] && shift
        deadline=$(($(date +%s) + ${HEALTH_WAIT_TIMEOUT:-300}))
        for name in "$@"; do
            until "$podman" healthcheck run "$name" >/dev/null 2>&1; do
                if [ "$(date +%s)" -ge "$deadline" ]; then
                    echo "$name: not healthy after ${HEALTH_WAIT_TIMEOUT:-300} s" >&2
                    exit 1
                fi
                state=$("$podman" inspect --format '{{.State.Status}}' "$name" 2>/dev/null || echo missing)
                case "$state" in
                created | exited | stopped | missing)
                    echo "$name: $state while waiting for it to be healthy" >&2
                    exit 1
                    ;;
                esac
                sleep 1
            done
        done
        exit 0
    fi
    ;;
create | run)
    for arg do
        shift
        case "$arg" in
        --requires=*) ;;
        *) set -- "$@" "$arg" ;;
        esac
    done
    ;;
esac
exec "$podman" "$@"
