#!/bin/sh
# Initialises the data directory on first start (the user, its password and its database), then
# runs the server listening on every address with password authentication.
set -eu
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    password=$(cat "$POSTGRES_PASSWORD_FILE")
else
    password=${POSTGRES_PASSWORD:?POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE is required}
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$password" > "$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 "$PGDATA" >/dev/null
    rm -f "$pwfile"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "host all all ::/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$db" != postgres ]; then
        pg_ctl --wait --silent --options="-c listen_addresses=''" start
        createdb --username="$user" --owner="$user" "$db"
        pg_ctl --wait --silent stop
    fi
fi
if [ "${1:-postgres}" = postgres ]; then
    [ "$#" -gt 0 ] && shift
    exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
