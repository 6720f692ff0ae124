#!/usr/bin/env bash
# End-to-end benchmark of `sluice run`: the real binary pinned to one core
# (taskset -c 0, GOMAXPROCS=1) receives logs from the real telemetrygen
# (pinned to the other core) over OTLP/gRPC at full speed, until the lake
# has committed every one. Reports the CPU time of the sluice process per
# million logs, the acknowledged and committed rates, and the largest queue
# depth seen (a queue that keeps growing means the rate is not sustainable).
#
#   scripts/bench-e2e.sh                      # 1M logs, 4 workers, batches of 100
#   LOGS=2000000 WORKERS=8 BATCH=512 scripts/bench-e2e.sh
#   RUNS=3 scripts/bench-e2e.sh               # repeat; one result line per run
#   PROFILE=20 scripts/bench-e2e.sh           # also a 20 s CPU profile (admin.pprof)
#   GEN=replay WORKERS=16 scripts/bench-e2e.sh
#
# GEN=telemetrygen (default) is the real OpenTelemetry SDK exporter; it costs
# far more CPU per log than sluice does, so on one core it, not sluice, sets
# the rate. GEN=replay sends pre-encoded telemetrygen-shaped requests from the
# e2e test binary (TestReplayLoad) to find the rate sluice itself sustains.
#
# Knobs: GEN, LOGS, WORKERS, BATCH (logs per request), RUNS,
# FLUSH (lake.flush_interval), GROUP_COMMIT (queue.group_commit_delay), SLUICE_CPU / GEN_CPU (cores), PROFILE (seconds),
# SLUICE_BIN (skip the build), SLUICE_TELEMETRYGEN, KEEP=1 (keep the work dir).
set -euo pipefail
cd "$(dirname "$0")/.."

LOGS="${LOGS:-1000000}"
GEN="${GEN:-telemetrygen}"
WORKERS="${WORKERS:-4}"
BATCH="${BATCH:-100}"
RUNS="${RUNS:-1}"
FLUSH="${FLUSH:-5s}"
GROUP_COMMIT="${GROUP_COMMIT:-0s}"
SLUICE_CPU="${SLUICE_CPU:-0}"
GEN_CPU="${GEN_CPU:-1}"
PROFILE="${PROFILE:-0}"
TIMEOUT="${TIMEOUT:-600}" # seconds, bound on each wait

work="$(mktemp -d /tmp/sluice-bench-e2e.XXXXXX)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

tg="${SLUICE_TELEMETRYGEN:-$PWD/.tools/bin/telemetrygen}"
if [ "$GEN" = replay ]; then
  go test -c -o "$work/e2e.test" ./internal/e2e
elif [ "$GEN" != telemetrygen ]; then
  echo "GEN must be telemetrygen or replay" >&2; exit 2
elif [ ! -x "$tg" ]; then
  echo "== installing telemetrygen into .tools/bin"
  GOBIN="$PWD/.tools/bin" go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@v0.161.0
  tg="$PWD/.tools/bin/telemetrygen"
fi
bin="${SLUICE_BIN:-}"
if [ -z "$bin" ]; then
  bin="$work/sluice"
  go build -o "$bin" ./cmd/sluice
fi

per_worker=$(( LOGS / WORKERS ))
total=$(( per_worker * WORKERS ))
if [ "$GEN" = replay ]; then total=$(( LOGS / BATCH * BATCH )); fi # whole requests
hz=$(getconf CLK_TCK)

# cpu_ticks PID: utime+stime of the process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# sys_ticks PID: stime alone (syscalls: fsync, network, file writes).
sys_ticks() { awk '{print $15}' "/proc/$1/stat"; }
# metric NAME: the sum of every sample of NAME on the admin port.
metric() {
  curl -fsS "http://$admin/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%.0f\n", s}'
}
now() { date +%s.%N; }
# cpu_wait_us PID: microseconds the process's threads were runnable but
# waiting for a CPU (the machine is shared; this says how much it was).
cpu_wait_us() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $2} END {printf "%.0f", s / 1000}'; }
# psi_us: the machine's CPU pressure counter (some), in microseconds.
psi_us() { awk '/^some/ {sub("total=", "", $5); print $5}' /proc/pressure/cpu 2>/dev/null || echo 0; }

echo "# sluice $(git describe --always --dirty 2>/dev/null || echo '?'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $total logs over OTLP/gRPC, $GEN with $WORKERS workers, $BATCH logs per request, full speed, on core $GEN_CPU; sluice GOMAXPROCS=1 on core $SLUICE_CPU; flush_interval $FLUSH, group_commit_delay $GROUP_COMMIT"

for run in $(seq 1 "$RUNS"); do
  lake="$work/lake-$run"
  cfg="$work/sluice-$run.yaml"
  cat >"$cfg" <<EOF
receivers:
  otlp:
    grpc_addr: 127.0.0.1:0
    http_addr: ""
    tenant_header: X-Scope-OrgID
admin:
  addr: 127.0.0.1:0$([ "$PROFILE" != 0 ] && printf '\n  pprof: true')
queue:
  max_bytes: 4GiB
  group_commit_delay: $GROUP_COMMIT
lake:
  root: $lake
  flush_interval: $FLUSH
log:
  level: warn
shutdown_timeout: 60s
EOF
  taskset -c "$SLUICE_CPU" env GOMAXPROCS=1 "$bin" run --config "$cfg" >"$work/out-$run" 2>"$work/err-$run" &
  pid=$!
  for _ in $(seq 1 300); do
    grep -q 'listening' "$work/out-$run" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/err-$run" >&2; exit 1; }
    sleep 0.1
  done
  grpc=$(grep -o 'otlp-grpc=[^ ]*' "$work/out-$run" | cut -d= -f2)
  admin=$(grep -o 'admin=[^ ]*' "$work/out-$run" | cut -d= -f2)
  [ -n "$grpc" ] && [ -n "$admin" ] || { echo "sluice did not start" >&2; cat "$work/err-$run" >&2; exit 1; }

  cpu0=$(cpu_ticks "$pid")
  sys0=$(sys_ticks "$pid")
  wait0=$(cpu_wait_us "$pid")
  psi0=$(psi_us)
  t0=$(now)
  if [ "$GEN" = replay ]; then
    taskset -c "$GEN_CPU" env SLUICE_BENCH_E2E_TARGET="$grpc" SLUICE_BENCH_E2E_LOGS="$total" \
      SLUICE_BENCH_E2E_BATCH="$BATCH" SLUICE_BENCH_E2E_WORKERS="$WORKERS" \
      "$work/e2e.test" -test.run '^TestReplayLoad$' >"$work/tg-$run" 2>&1 &
  else
    taskset -c "$GEN_CPU" "$tg" logs --otlp-insecure --otlp-endpoint "$grpc" --rate 0 \
      --workers "$WORKERS" --logs "$per_worker" --batch-size "$BATCH" \
      --otlp-header 'X-Scope-OrgID="bench"' >"$work/tg-$run" 2>&1 &
  fi
  gen=$!
  prof=""
  if [ "$PROFILE" != 0 ]; then
    curl -fsS -o "$work/cpu-$run.prof" "http://$admin/debug/pprof/profile?seconds=$PROFILE" &
    prof=$!
  fi
  # Sample while the generator runs: the queue depth (bounded by the
  # checkpoint cadence) and the lake loop's lag behind the acknowledged end
  # of the queue (what grows without bound when sluice cannot keep up).
  maxq=0 maxlag=0 lag=0
  for _ in $(seq 1 $(( TIMEOUT * 4 ))); do
    kill -0 "$gen" 2>/dev/null || break
    m=$(curl -fsS "http://$admin/metrics" 2>/dev/null || true)
    q=$(awk '$1 == "sluice_queue_bytes" {printf "%.0f", $2}' <<<"$m")
    lag=$(awk '$1 == "sluice_queue_durable_position" {d = $2} $1 == "sluice_lake_committed_queue_position" {c = $2}
               $1 == "sluice_lake_uncommitted_queue_bytes" {u = $2} END {l = d - c - u; printf "%.0f", (l > 0 ? l : 0)}' <<<"$m")
    [ "${q:-0}" -gt "$maxq" ] && maxq=$q
    [ "${lag:-0}" -gt "$maxlag" ] && maxlag=$lag
    sleep 0.25
  done
  if ! wait "$gen"; then echo "$GEN failed:" >&2; tail -20 "$work/tg-$run" >&2; exit 1; fi
  t1=$(now)
  cpu1=$(cpu_ticks "$pid")
  accepted=$(metric sluice_pipeline_accepted_records_total)

  # Wait until every acknowledged record is written and committed: the
  # committed queue position reached the durable one.
  for _ in $(seq 1 $(( TIMEOUT * 10 ))); do
    written=$(metric sluice_lake_written_rows_total)
    durable=$(metric sluice_queue_durable_position)
    committed=$(metric sluice_lake_committed_queue_position)
    [ "$written" -ge "$accepted" ] && [ "$committed" -ge "$durable" ] && break
    sleep 0.1
  done
  t2=$(now)
  cpu2=$(cpu_ticks "$pid")
  sys2=$(sys_ticks "$pid")
  wait2=$(cpu_wait_us "$pid")
  psi2=$(psi_us)
  # The profile must end before the process does.
  if [ -n "$prof" ]; then wait "$prof" || echo "CPU profile failed" >&2; fi
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  qbytes=$(metric sluice_queue_appended_records_total) # appended queue records (requests)
  fsyncs=$(metric sluice_queue_fsyncs_total)
  segs=$(metric sluice_lake_segments_total)
  kill -TERM "$pid"
  wait "$pid" || { echo "sluice exit $? after SIGTERM" >&2; tail -20 "$work/err-$run" >&2; exit 1; }
  pid=""
  rows=$("$bin" lake ls --lake "$lake" --table logs | tail -1 | awk '{print $3}')
  [ "$rows" = "$total" ] || { echo "lake ls: $rows rows, want $total" >&2; exit 1; }
  [ "$accepted" = "$total" ] || { echo "accepted $accepted, want $total" >&2; exit 1; }

  awk -v n="$total" -v hz="$hz" -v c0="$cpu0" -v c1="$cpu1" -v c2="$cpu2" -v s0="$sys0" -v s2="$sys2" -v w0="$wait0" -v w2="$wait2" -v p0="$psi0" -v p2="$psi2" -v t0="$t0" -v t1="$t1" -v t2="$t2" \
      -v maxq="$maxq" -v maxlag="$maxlag" -v lastlag="$lag" -v rss="$rss" -v reqs="$qbytes" -v fs="$fsyncs" -v segs="$segs" -v run="$run" 'BEGIN {
    cpu = (c2 - c0) / hz; load = (c1 - c0) / hz
    printf "run %d: %.2f CPU-s per 1M logs (%.1f CPU-s for %d logs, %.0f%% in the kernel; %.0f%% of a core while receiving)\n", run, cpu / (n / 1e6), cpu, n, 100 * (s2 - s0) / (c2 - c0), 100 * load / (t1 - t0)
    printf "       acknowledged %.0f logs/s (%.1f s), all committed %.0f logs/s (%.1f s); max queue %.1f MiB; lake loop behind by max %.1f MiB, %.1f MiB at the end of the load; peak RSS %.0f MiB\n", n / (t1 - t0), t1 - t0, n / (t2 - t0), t2 - t0, maxq / 1048576, maxlag / 1048576, lastlag / 1048576, rss / 1024
    printf "       %d requests, %.1f per fsync; %d lake files; sluice waited %.1f s for its core; machine CPU pressure %.0f%%\n", reqs, reqs / (fs > 0 ? fs : 1), segs, (w2 - w0) / 1e6, 100 * (p2 - p0) / 1e6 / (t2 - t0)
  }'
  if [ "$PROFILE" != 0 ] && [ -s "$work/cpu-$run.prof" ]; then
    mkdir -p bench-profiles
    cp "$work/cpu-$run.prof" "bench-profiles/e2e-run-$run-cpu.prof"
    echo "       CPU profile: bench-profiles/e2e-run-$run-cpu.prof (go tool pprof -top $bin bench-profiles/e2e-run-$run-cpu.prof)"
    cp "$bin" bench-profiles/e2e-sluice
  fi
done
