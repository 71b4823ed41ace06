#!/bin/sh
# make images: the schedd image, and PostgreSQL and etcd images from Debian's packages for the
# container tests, all on a Debian base made with mmdebstrap, so no image registry is needed.
#
#   DEBIAN_MIRROR   Debian mirror for the base (default http://deb.debian.org/debian)
#   CA_BUNDLE       CA bundle mounted into builds, for pip behind a proxy that re-signs TLS
#                   (default /etc/ssl/certs/ca-certificates.crt, when it exists)
#   SCHEDD_IMAGE    the schedd image's name (default localhost/schedd:0.1.0)
#
# The base is made once (kept as localhost/bookworm-base:1); the other builds reuse their layers,
# so a rebuild after a code change only rebuilds schedd's own wheel and its layer.
set -eu
cd "$(dirname "$0")/../.."
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
schedd=${SCHEDD_IMAGE:-localhost/schedd:0.1.0}
base=localhost/bookworm-base:1
python=localhost/schedd-python:3.11-bookworm

timed() {
    label=$1; shift
    start=$(date +%s%N)
    "$@"
    tenths=$((($(date +%s%N) - start) / 100000000))
    printf '%-40s %4d.%d s\n' "$label" $((tenths / 10)) $((tenths % 10)) >&2
}

make_base() {
    dir=$(mktemp -d)
    mmdebstrap --quiet --variant=minbase --mode=root bookworm "$dir/bookworm.tar" "deb $mirror bookworm main"
    podman import --quiet \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$dir/bookworm.tar" "$base" >/dev/null
    rm -rf "$dir"
}

build() {
    podman build --quiet --pull=never --layers "$@" >/dev/null
}

ca_mount=
[ -f "$ca" ] && ca_mount="--volume=$ca:/etc/ssl/certs/ca-certificates.crt:ro"
podman image exists "$base" || timed "$base" make_base
timed "$python" build --build-arg BASE_IMAGE="$base" -t "$python" deploy/images/python
timed localhost/schedd-postgres:15 build --build-arg BASE_IMAGE="$base" -t localhost/schedd-postgres:15 \
    deploy/images/postgres
timed localhost/schedd-etcd:3.4 build --build-arg BASE_IMAGE="$base" -t localhost/schedd-etcd:3.4 deploy/images/etcd
# Only this build reaches PyPI; the others install Debian's packages (ca-certificates among them,
# which must write the file the mount would shadow).
timed "$schedd" build ${ca_mount:+"$ca_mount"} --build-arg PYTHON_IMAGE="$python" -t "$schedd" .
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
    | grep -E "^($schedd|localhost/schedd-postgres:15|localhost/schedd-etcd:3.4|$python) "
