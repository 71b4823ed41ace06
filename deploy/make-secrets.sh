#!/usr/bin/env sh
# Make what a schedd deployment needs and must not keep in version control, with openssl only:
#
#   deploy/make-secrets.sh [DIR] [EXTRA_DNS_NAME...]
#
# DIR (default: deploy/compose/secrets) receives
#   tls/ca.crt, tls/ca.key        a private CA (keep ca.key offline; it signs the certificates below)
#   tls/server.crt, server.key    the certificate the api and the registry serve, for the names api,
#                                 registry, localhost, 127.0.0.1 and every EXTRA_DNS_NAME (e.g. the
#                                 Kubernetes Service names schedd-api.NAMESPACE.svc)
#   tls/client.crt, client.key    a client certificate the CA signed (mutual TLS, schedd-probe)
#   tls/etcd.crt, etcd.key        the certificate etcd serves its clients, for the names etcd and
#                                 *.etcd (compose's etcd; Kubernetes' members etcd-0.etcd, ...)
#   bootstrap-token               a first admin token (SCHEDD_BOOTSTRAP_TOKEN, sdt_<id>_<secret>)
#   postgres-password             the database password
#   etcd/root, etcd/schedd-scheduler, etcd/schedd-api, etcd/schedd-worker
#                                 the passwords of etcd's users (schedd_coord.access; etcd-init
#                                 sets them up)
# and DIR/../.env holds the two secrets as variables for docker compose. An existing file is kept,
# so running the script again changes nothing; delete DIR to make everything new.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-"$here/compose/secrets"}
[ $# -gt 0 ] && shift
umask 077
mkdir -p "$dir/tls"
tls="$dir/tls"

random_urlsafe() { openssl rand -base64 "$1" | tr '+/' '-_' | tr -d '=\n'; }

if [ ! -s "$dir/bootstrap-token" ]; then
    printf 'sdt_%s_%s\n' "$(openssl rand -hex 6)" "$(random_urlsafe 32)" >"$dir/bootstrap-token"
fi
if [ ! -s "$dir/postgres-password" ]; then
    random_urlsafe 24 >"$dir/postgres-password"
    echo >>"$dir/postgres-password"
fi

mkdir -p "$dir/etcd"
for user in root schedd-scheduler schedd-api schedd-worker; do
    if [ ! -s "$dir/etcd/$user" ]; then
        random_urlsafe 24 >"$dir/etcd/$user"
        echo >>"$dir/etcd/$user"
    fi
done

if [ ! -s "$tls/ca.crt" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
        -subj "/CN=schedd CA" -keyout "$tls/ca.key" -out "$tls/ca.crt" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi

# issue NAME EXTENDED_KEY_USAGE SUBJECT_ALT_NAMES: a key and a certificate the CA signed, for a year.
issue() {
    [ -s "$tls/$1.crt" ] && return 0
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=schedd $1" \
        -keyout "$tls/$1.key" -out "$tls/$1.csr"
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=%s\n' \
        "$2" "$3" >"$tls/$1.ext"
    openssl x509 -req -in "$tls/$1.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
        -days 365 -extfile "$tls/$1.ext" -out "$tls/$1.crt"
    rm -f "$tls/$1.csr" "$tls/$1.ext"
}

names="DNS:api,DNS:registry,DNS:localhost,IP:127.0.0.1"
for name in "$@"; do names="$names,DNS:$name"; done
issue server serverAuth "$names"
issue client clientAuth "DNS:schedd-client"
issue etcd serverAuth "DNS:etcd,DNS:*.etcd,DNS:localhost,IP:127.0.0.1"

# The services run as uid 10001 and read these through bind mounts: the files are world-readable,
# the directories are not (only their owner on the host may enter them).
chmod 0700 "$dir" "$tls" "$dir/etcd"
chmod 0644 "$dir"/bootstrap-token "$dir"/postgres-password "$tls"/*.crt "$tls"/server.key "$tls"/client.key "$tls"/etcd.key
chmod 0644 "$dir"/etcd/*
chmod 0600 "$tls/ca.key"

env_file="$(dirname "$dir")/.env"
if [ ! -s "$env_file" ]; then
    {
        echo "# Made by deploy/make-secrets.sh; read by docker compose. Not for version control."
        echo "SCHEDD_BOOTSTRAP_TOKEN=$(cat "$dir/bootstrap-token")"
        echo "POSTGRES_PASSWORD=$(cat "$dir/postgres-password")"
        echo "GRAFANA_ADMIN_PASSWORD=$(random_urlsafe 18)"
    } >"$env_file"
fi
echo "secrets in $dir, compose variables in $env_file"
