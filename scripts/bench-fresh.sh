#!/usr/bin/env bash
# Freshness and file count of `sluice run` with the DEFAULT lake settings
# (flush_interval 60s, upkeep on): telemetrygen sends logs, metrics and
# spans for DURATION while a probe posts one uniquely named log every few
# seconds and polls the logs search until it is found (ack -> visible).
# At the end, before any compaction (min_age 10m) and before the shutdown
# checkpoint, it counts the lake's files per table, tenant and hour
# partition from the catalog (`sluice lake ls`).
#
#   scripts/bench-fresh.sh                       # 5 minutes
#   DURATION=180 RATE=500 scripts/bench-fresh.sh
#
# Knobs: DURATION (s), RATE (records/s per signal and worker), WORKERS,
# SLUICE_BIN (skip the build), SLUICE_TELEMETRYGEN, KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-300}"
RATE="${RATE:-200}"
WORKERS="${WORKERS:-2}"
PROBE_EVERY="${PROBE_EVERY:-3}"

work="$(mktemp -d /tmp/sluice-bench-fresh.XXXXXX)"
pid=""
gens=()
cleanup() {
  for g in "${gens[@]}"; do kill "$g" 2>/dev/null || true; done
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

tg="${SLUICE_TELEMETRYGEN:-$PWD/.tools/bin/telemetrygen}"
[ -x "$tg" ] || { echo "telemetrygen not found at $tg (make test installs it; or set SLUICE_TELEMETRYGEN)" >&2; exit 1; }
bin="${SLUICE_BIN:-}"
if [ -z "$bin" ]; then
  bin="$work/sluice"
  go build -o "$bin" ./cmd/sluice
fi

lake="$work/lake"
cfg="$work/sluice.yaml"
# Only addresses differ from the embedded defaults.
cat >"$cfg" <<EOF
receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
query:
  addr: 127.0.0.1:0
lake:
  root: $lake
log:
  level: warn
EOF
"$bin" run --config "$cfg" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 1 300); do
  grep -q 'listening' "$work/out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/err" >&2; exit 1; }
  sleep 0.1
done
grpc=$(grep -o 'otlp-grpc=[^ ]*' "$work/out" | cut -d= -f2)
http=$(grep -o 'otlp-http=[^ ]*' "$work/out" | cut -d= -f2)
admin=$(grep -o 'admin=[^ ]*' "$work/out" | cut -d= -f2)
query=$(grep -o 'query=[^ ]*' "$work/out" | cut -d= -f2)
metric() {
  curl -fsS "http://$admin/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%.0f\n", s}'
}

echo "# sluice $(git describe --always --dirty 2>/dev/null || echo '?'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# default lake settings; telemetrygen logs, metrics, traces: $WORKERS workers x $RATE/s each for ${DURATION}s; probe every ${PROBE_EVERY}s"
for sig in logs metrics traces; do
  "$tg" "$sig" --otlp-insecure --otlp-endpoint "$grpc" --rate "$RATE" --workers "$WORKERS" \
    --duration "${DURATION}s" >"$work/tg-$sig" 2>&1 &
  gens+=($!)
done

# Probe: post one log with a unique body, poll the search until it is there.
lat=()
end=$(( $(date +%s) + DURATION ))
i=0
while [ "$(date +%s)" -lt "$end" ]; do
  i=$((i + 1))
  body="fresh-probe-$i-$RANDOM"
  ns=$(date +%s%N)
  json='{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"probe"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":"'$ns'","body":{"stringValue":"'$body'"}}]}]}]}'
  curl -fsS -o /dev/null -H 'Content-Type: application/json' --data "$json" "http://$http/v1/logs"
  t0=$(date +%s%N)
  while :; do
    n=$(curl -fsS "http://$query/api/v1/logs/search?service=probe&q=$body&start=$(( ns / 1000000000 - 60 ))" | grep -c '"body"' || true)
    [ "$n" -ge 1 ] && break
    [ $(( $(date +%s%N) - t0 )) -gt 30000000000 ] && { echo "probe $i not visible after 30 s" >&2; break; }
    sleep 0.02
  done
  lat+=($(( ($(date +%s%N) - t0) / 1000000 )))
  sleep "$PROBE_EVERY"
done
for g in "${gens[@]}"; do wait "$g" || true; done
gens=()

sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
cnt=${#lat[@]}
p50=$(echo "$sorted" | sed -n "$(( (cnt + 1) / 2 ))p")
p99=$(echo "$sorted" | sed -n "$(( (cnt * 99 + 99) / 100 ))p")
mx=$(echo "$sorted" | tail -1)
echo "ack -> visible in the logs search: $cnt probes, p50 ${p50} ms, p99 ${p99} ms, max ${mx} ms"
echo "checkpoints: $(metric sluice_lake_checkpoints_total), segments committed: $(metric sluice_lake_segments_total), tail builds: $(metric sluice_lake_tail_builds_total), tail build errors: $(metric sluice_lake_tail_build_errors_total), list retries: $(metric sluice_lake_tail_list_retries_total), tail bytes now: $(metric sluice_lake_tail_bytes)"
echo "rows written: $(metric sluice_lake_written_rows_total)"

# Files per partition-hour, before compaction (min_age 10m) and before the
# shutdown checkpoint.
echo "files per (table, tenant, hour) partition (SEGMENTS), live segments:"
"$bin" lake ls --lake "$lake" --summary
kill -TERM "$pid"
wait "$pid" || true
pid=""
