#!/usr/bin/env bash
# Manual check of the Docker image (docker/Dockerfile): builds it and checks that it works.
# NOT part of CI or of the test suite; run it by hand, as root, on Debian bookworm, from anywhere:
#
#     sudo devtools/docker_check.sh
#
# Why stand-in base images: the machine this was written on has no Docker Hub access (only the
# Debian, PyPI and npm registries are reachable), so `node:20-slim` and `python:3.11-slim` cannot
# be pulled. The script builds local images under exactly those tags from a debootstrap'ed
# Debian bookworm (Debian's python3.11 + pip, Debian's nodejs + npm), so docker/Dockerfile builds
# unmodified. What this verifies is the Dockerfile (stages, user, static files, healthcheck, the
# server answering /healthz), not the official base images: the image size it prints is that of
# the stand-in bases plus the project's layers. If those tags already exist locally (real images
# pulled from Docker Hub), set STANDIN=0 to use them instead.
#
# Steps: install docker.io + debootstrap (+ curl), start dockerd unless one is running (default
# storage driver, else vfs; iptables off if the bridge cannot be set up), build the stand-ins,
# build the project image, run the checks. Exits non-zero on the first failed check.
# Everything outside the repository goes under $WORK (default /tmp/telescope-docker-check); at
# the end the container, images, rootfs and (if this script started it) dockerd are removed,
# unless KEEP=1.
set -euo pipefail

cd "$(dirname "$0")/.."
WORK=${WORK:-/tmp/telescope-docker-check}
IMAGE=${IMAGE:-telescope-dashboard:check}
STANDIN=${STANDIN:-1}
KEEP=${KEEP:-0}
PORT=${PORT:-18000}
CONTAINER=telescope-docker-check
# The docker.io package's client: a newer docker CLI elsewhere on PATH may refuse BuildKit
# without the buildx plugin, and BuildKit is what honours docker/Dockerfile.dockerignore.
DOCKER=${DOCKER:-/usr/bin/docker}
export DOCKER_BUILDKIT=1

log() { printf '\n=== %s\n' "$*"; }
fail() { printf '\nFAIL: %s\n' "$*" >&2; exit 1; }
pass() { printf 'ok: %s\n' "$*"; }

[ "$(id -u)" = 0 ] || fail "run as root"
mkdir -p "$WORK"
STARTED_DOCKERD=0

cleanup() {
    local rc=$?
    "$DOCKER" rm -f "$CONTAINER" >/dev/null 2>&1 || true
    if [ "$KEEP" != 1 ]; then
        log "cleaning up (KEEP=1 keeps images, rootfs and dockerd)"
        "$DOCKER" rmi -f "$IMAGE" >/dev/null 2>&1 || true
        if [ "$STANDIN" = 1 ]; then
            "$DOCKER" rmi -f node:20-slim python:3.11-slim telescope-standin/bookworm:base \
                >/dev/null 2>&1 || true
        fi
        # (the build cache of a daemon this script did not start is not its to wipe)
        [ "$STARTED_DOCKERD" = 1 ] && { "$DOCKER" builder prune -af >/dev/null 2>&1 || true; }
        if [ "$STARTED_DOCKERD" = 1 ] && [ -f "$WORK/dockerd.pid" ]; then
            kill "$(cat "$WORK/dockerd.pid")" 2>/dev/null || true
            for _ in $(seq 30); do [ -f "$WORK/dockerd.pid" ] || break; sleep 1; done
        fi
        rm -rf "$WORK/rootfs" "$WORK/standin"
        [ "$STARTED_DOCKERD" = 1 ] && rm -rf "$WORK/docker-data" "$WORK/docker-exec"
    fi
    exit "$rc"
}
trap cleanup EXIT

# --- 1. packages and dockerd ------------------------------------------------------------------
log "packages"
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v curl >/dev/null || need+=(curl)
if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
[ -x "$DOCKER" ] || fail "no docker client at $DOCKER (set DOCKER=...)"

start_dockerd() {
    rm -f "$WORK/dockerd.pid"
    dockerd --data-root "$WORK/docker-data" --exec-root "$WORK/docker-exec" \
        --pidfile "$WORK/dockerd.pid" "$@" >"$WORK/dockerd.log" 2>&1 &
    for _ in $(seq 30); do
        "$DOCKER" info >/dev/null 2>&1 && return 0
        kill -0 $! 2>/dev/null || return 1
        sleep 1
    done
    kill $! 2>/dev/null || true
    return 1
}
if "$DOCKER" info >/dev/null 2>&1; then
    log "using the running docker daemon"
else
    log "starting dockerd (log: $WORK/dockerd.log)"
    start_dockerd || start_dockerd --storage-driver=vfs || start_dockerd --iptables=false \
        || start_dockerd --storage-driver=vfs --iptables=false \
        || { tail -20 "$WORK/dockerd.log" >&2; fail "dockerd does not start"; }
    STARTED_DOCKERD=1
fi
"$DOCKER" version --format 'docker client {{.Client.Version}}, daemon {{.Server.Version}}'
"$DOCKER" info --format 'storage driver {{.Driver}}, cgroup {{.CgroupVersion}}'

# --- 2. stand-in base images ------------------------------------------------------------------
if [ "$STANDIN" = 1 ]; then
    # The Debian mirror apt uses here (deb822 or one-line sources), for debootstrap and the images.
    MIRROR=$(grep -hoE '^(URIs:|deb)[[:space:]]+https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
        2>/dev/null | awk '{print $2}' | head -1 || true)
    MIRROR=${MIRROR:-http://deb.debian.org/debian}
    MIRROR=${MIRROR%/}
    SECURITY=${MIRROR%/debian}/debian-security
    log "stand-in bases from Debian bookworm ($MIRROR)"
    if ! "$DOCKER" image inspect telescope-standin/bookworm:base >/dev/null 2>&1; then
        rm -rf "$WORK/rootfs"
        debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
            || { tail -20 "$WORK/debootstrap.log" >&2; fail "debootstrap"; }
        rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
        tar -C "$WORK/rootfs" -c . | "$DOCKER" import - telescope-standin/bookworm:base >/dev/null
        rm -rf "$WORK/rootfs"
    fi

    ctx="$WORK/standin"
    rm -rf "$ctx" && mkdir -p "$ctx/certs"
    cat >"$ctx/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: $SECURITY
Suites: bookworm-security
Components: main
EOF
    # Local CAs (e.g. an HTTPS-intercepting egress proxy) must be trusted inside the builds too.
    cp /usr/local/share/ca-certificates/*.crt "$ctx/certs/" 2>/dev/null || true
    # The package indexes the host's pip and npm use, when not the public defaults (file://
    # indexes on the host's disk mean nothing inside an image and are left out).
    : >"$ctx/pip.conf"
    if command -v pip3 >/dev/null; then
        idx=$(pip3 config get global.index-url 2>/dev/null || true)
        idx=${PIP_INDEX_URL:-$idx}
        case "$idx" in http*) printf '[global]\nindex-url = %s\n' "$idx" >"$ctx/pip.conf" ;; esac
    fi
    npm_registry=https://registry.npmjs.org/
    if command -v npm >/dev/null; then
        npm_registry=$(npm config get registry 2>/dev/null || echo "$npm_registry")
    fi

    cat >"$ctx/Dockerfile.python" <<'EOF'
FROM telescope-standin/bookworm:base
COPY debian.sources /etc/apt/sources.list.d/debian.sources
COPY certs/ /usr/local/share/ca-certificates/
COPY pip.conf /etc/pip.conf
RUN rm -f /etc/apt/sources.list && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       ca-certificates python3 python3-pip python-is-python3 \
    && update-ca-certificates && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \
    && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["python3"]
EOF
    cat >"$ctx/Dockerfile.node" <<EOF
FROM telescope-standin/bookworm:base
COPY debian.sources /etc/apt/sources.list.d/debian.sources
COPY certs/ /usr/local/share/ca-certificates/
RUN rm -f /etc/apt/sources.list && apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
       ca-certificates nodejs npm \\
    && update-ca-certificates && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8 NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \\
    npm_config_registry=$npm_registry \\
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["node"]
EOF
    "$DOCKER" build -q --network host -f "$ctx/Dockerfile.python" -t python:3.11-slim "$ctx" \
        >/dev/null || fail "stand-in python:3.11-slim"
    "$DOCKER" build -q --network host -f "$ctx/Dockerfile.node" -t node:20-slim "$ctx" \
        >/dev/null || fail "stand-in node:20-slim"
    "$DOCKER" run --rm python:3.11-slim sh -c 'python --version && pip --version'
    "$DOCKER" run --rm node:20-slim sh -c 'echo "node $(node --version), npm $(npm --version)"'
fi

# --- 3. the project image and its checks ------------------------------------------------------
log "docker build -f docker/Dockerfile -t $IMAGE . (log: $WORK/build.log)"
"$DOCKER" build --progress plain --network host -f docker/Dockerfile -t "$IMAGE" . \
    >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; fail "docker build"; }
stages=$(grep -c '^FROM ' docker/Dockerfile)
[ "$stages" -ge 2 ] || fail "docker/Dockerfile is not multi-stage"
pass "built ($stages stages)"

log "checks"
size=$("$DOCKER" image inspect "$IMAGE" --format '{{.Size}}')
echo "image size: $size bytes ($((size / 1000000)) MB, with the stand-in base)"

ident=$("$DOCKER" run --rm "$IMAGE" id)
echo "\$ docker run --rm $IMAGE id"
echo "$ident"
case "$ident" in uid=0\(*) fail "runs as root" ;; esac
[[ "$ident" == "uid=10001(telescope)"* ]] || fail "unexpected user: $ident"
pass "non-root user"

user=$("$DOCKER" image inspect "$IMAGE" --format '{{.Config.User}}')
[ "$user" = telescope ] || fail "Config.User is '$user'"

"$DOCKER" run --rm "$IMAGE" sh -c '
    for tool in node npm gcc cc; do
        if command -v "$tool" >/dev/null; then echo "build tool in the final image: $tool"; exit 1; fi
    done
    # (/wheels may remain as the empty mount point of the install step: only content counts)
    for dir in /src /wheels; do
        if [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
            echo "build leftover in the final image: $dir"; exit 1
        fi
    done
    found=$(find / -xdev -type d -name node_modules 2>/dev/null | head -3)
    if [ -n "$found" ]; then echo "node_modules in the final image: $found"; exit 1; fi
' || fail "final image holds build stages' content"
pass "final stage: no node/npm/compiler, no node_modules, /src, /wheels"

"$DOCKER" run --rm "$IMAGE" sh -c '
    test -f /app/static/staticfiles.json || { echo "no /app/static/staticfiles.json"; exit 1; }
    test -n "$(find /app/static/vendor/sortablejs -name "sortable.esm.*.js" 2>/dev/null)" \
        || { echo "no hashed SortableJS under /app/static/vendor"; exit 1; }
    echo "$(find /app/static -type f | wc -l) files in /app/static"
    if touch /app/static/.probe 2>/dev/null; then echo "/app/static writable by the server user"; exit 1; fi
' || fail "static files"
pass "static files collected at build time, read-only for the server user"

hc=$("$DOCKER" image inspect "$IMAGE" --format '{{json .Config.Healthcheck}}')
echo "healthcheck: $hc"
[[ "$hc" == *"/healthz"* ]] || fail "no HEALTHCHECK on /healthz"
pass "HEALTHCHECK"

log "docker run (embedded SQLite, in-memory channel layer)"
"$DOCKER" rm -f "$CONTAINER" >/dev/null 2>&1 || true
"$DOCKER" run -d --name "$CONTAINER" -e SECRET_KEY=docker-check-only-not-a-secret \
    -p "127.0.0.1:$PORT:8000" "$IMAGE" >/dev/null
status=starting
for i in $(seq 60); do
    status=$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$CONTAINER" 2>/dev/null || echo gone)
    [ "$status" = healthy ] && break
    [ "$("$DOCKER" inspect -f '{{.State.Running}}' "$CONTAINER")" = true ] || break
    sleep 2
done
echo "health status after ~$((i * 2)) s: $status"
if [ "$status" != healthy ]; then
    "$DOCKER" logs "$CONTAINER" 2>&1 | tail -20 >&2
    fail "container not healthy"
fi
pass "container healthy"

body=$(curl -sS -o "$WORK/healthz.json" -w '%{http_code} %{content_type}' "http://127.0.0.1:$PORT/healthz")
echo "\$ curl http://127.0.0.1:$PORT/healthz -> $body"
cat "$WORK/healthz.json"; echo
[[ "$body" == "200 application/json"* ]] || fail "/healthz: $body"
grep -q '"ok":true' "$WORK/healthz.json" || fail "/healthz not ok"
pass "GET /healthz 200 JSON"

log "all checks passed"
