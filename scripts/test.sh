#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need (the
# Python readers used for independent cross-checks), then vets and tests
# every package. Nothing is skipped: a test that cannot find its tools fails.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "test.sh: Go is not installed" >&2; exit 1; }
command -v python3 >/dev/null || { echo "test.sh: python3 is not installed" >&2; exit 1; }

venv="${SLUICE_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "== creating Python venv $venv"
  python3 -m venv "$venv"
fi
if ! cmp -s tests/requirements.txt "$venv/.requirements.installed"; then
  echo "== installing tests/requirements.txt into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/requirements.txt
  cp tests/requirements.txt "$venv/.requirements.installed"
fi
export SLUICE_PYTHON="$PWD/$venv/bin/python"

# The real OpenTelemetry load generator, for the receiver and run tests.
export SLUICE_TELEMETRYGEN="${SLUICE_TELEMETRYGEN:-$PWD/.tools/bin/telemetrygen}"
if [ ! -x "$SLUICE_TELEMETRYGEN" ]; then
  echo "== installing telemetrygen into .tools/bin (about a minute)"
  GOBIN="$PWD/.tools/bin" go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0
  export SLUICE_TELEMETRYGEN="$PWD/.tools/bin/telemetrygen"
fi
# PostgreSQL server binaries, for the catalog's PostgreSQL dialect: the
# tests start a throwaway server of their own (internal/pgtest) and never use
# the cluster Debian's package creates. Skipped when $SLUICE_POSTGRES_DSN
# names a server.
if [ -z "${SLUICE_POSTGRES_DSN:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
  echo "== installing PostgreSQL with apt-get (about 15 s plus apt-get update)"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
# promtool (Debian's prometheus package), the real Prometheus client the
# query API's end-to-end test runs against sluice.
if [ -z "${SLUICE_PROMTOOL:-}" ] && ! command -v promtool >/dev/null; then
  echo "== installing prometheus (for promtool) with apt-get"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
# vmagent (Debian's victoria-metrics package), a real remote-write sender
# and receiver for the relay's end-to-end tests and scripts/bench-relay.sh.
if [ -z "${SLUICE_VMAGENT:-}" ] && ! command -v vmagent >/dev/null; then
  echo "== installing victoria-metrics (for vmagent) with apt-get"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends victoria-metrics >/dev/null
fi
# A real S3-compatible server (versitygw serving a temporary directory),
# for the S3 lake store, pipeline and ingest tests.
export SLUICE_S3_SERVER="${SLUICE_S3_SERVER:-$PWD/.tools/bin/versitygw}"
if [ ! -x "$SLUICE_S3_SERVER" ]; then
  echo "== installing versitygw into .tools/bin (a few minutes on a cold module cache)"
  GOBIN="$PWD/.tools/bin" go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
  export SLUICE_S3_SERVER="$PWD/.tools/bin/versitygw"
fi
# Tests refuse to skip for missing tools when this is set.
export SLUICE_REQUIRE_ALL=1

echo "== go vet"
go vet ./...
# make race (SLUICE_TEST_RACE=1): every package under the race detector,
# and the end-to-end tests against a sluice built with it. Several times
# slower than the plain suite, so not part of make test.
flags=(-count=1 -timeout 30m)
if [ "${SLUICE_TEST_RACE:-}" = 1 ]; then
  flags=(-count=1 -race -timeout 120m)
  export SLUICE_E2E_RACE=1
fi
echo "== go test ${flags[*]}"
log=$(mktemp /tmp/sluice-test.XXXXXX)
trap 'rm -f "$log"' EXIT
# set -e would end the script at a failing go test; its status is kept instead.
status=0
go test "${flags[@]}" ./... 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
passed=$(grep -c '^ok ' "$log" || true)
failed=$(grep -c '^FAIL	' "$log" || true)
if [ "$status" != 0 ]; then
  # A CI log shows its tail, and a package that hung ends in thousands of
  # lines of goroutine dump: repeat what failed at the end. For a hang that
  # is the binary's "panic: test timed out" header and the tests that were
  # running, each with how long it had run.
  echo "== failures"
  # For a failed test, its --- FAIL line and the first lines it logged.
  awk 'BEGIN { said = 99 }
    /^panic: /                          { print; next }
    /^[ \t]*running tests:$/            { run = 1; print; next }
    run && /^[ \t]+[^ \t].* \([0-9.hms]+\)$/ { print; next }
                                        { run = 0 }
    /^[ \t]*--- FAIL: /                 { print; said = 0; next }
    /^FAIL[ \t]/                        { print; said = 99; next }
    /^[ \t]/ && said < 8                { print; said++; next }
                                        { said = 99 }
  ' "$log"
fi
echo "packages: $passed passed, $failed failed"
exit "$status"
