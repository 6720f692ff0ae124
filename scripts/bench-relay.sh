#!/usr/bin/env bash
# Relay benchmark: remote write in -> remote write out (1.0, or 2.0), side by side
# for sluice (receiver -> durable queue (fsync) -> prometheus_remote_write
# exporter, no lake: a forward-only pipeline) and vmagent (Debian package
# victoria-metrics), each pinned to one core (taskset, GOMAXPROCS=1), each
# relaying the same pre-encoded load into the same null sink (the e2e test
# binary's TestRelaySink, which decodes and counts samples). The load
# generator (TestRelayLoad) and the sink share the other core.
#
# Reports, per relay and load shape, samples per CPU-second of the relay
# process (utime+stime from the first request until the sink counted every
# sample) and the sluice/vmagent ratio.
#
#   scripts/bench-relay.sh                     # both shapes, 2M samples each
#   SAMPLES=4000000 scripts/bench-relay.sh
#   SHAPES="1500:8" scripts/bench-relay.sh     # series per request : labels per series
#   ONLY=sluice SHAPES="1500:8:2 100:6:2" scripts/bench-relay.sh   # remote write 2.0 in and out
#   ONLY=sluice PROFILE=1 scripts/bench-relay.sh   # CPU profile of sluice's relay
#   OLD_BIN=/tmp/sluice-old ONLY=sluice scripts/bench-relay.sh   # A/B: this tree against another binary
#   FLOOR=1 scripts/bench-relay.sh             # adds "floor": the load into a bare net/http decoder on the relay's core
#
# The relays run in ROUNDS rounds (default 3): each round runs each relay once
# on the same load, one after the other (the order rotates per round), with the
# load average at the start and end of the round; the summary gives each
# round's ratio and the median of the rounds, so a burst of load on the machine
# during one run does not decide the result.
#
# LAKE=1 adds remote write -> lake runs (default pipeline, upkeep off, flush
# every 5s): samples per CPU-second until every sample is committed.
#
# Knobs: SAMPLES, SHAPES (default "1500:8 100:6": the large-request shape and a
# small-request one; a third field 2 makes a shape remote write 2.0 in and
# out: symbols table, metadata on every series, a 2.0 exporter; vmagent 1.79
# takes no 2.0, so those shapes run sluice only), ROUNDS, OLD_BIN (a second sluice
# binary, "sluice-old", run in every round beside the first), WORKERS, RELAY_CPU / GEN_CPU, ONLY (sluice|vmagent),
# GROUP_COMMIT_DELAY (sluice's queue.group_commit_delay, default 1ms),
# MIN_FREE_BYTES (sluice's queue.min_free_bytes, e.g. 64MiB on a nearly full
# shared disk: the relay's queue holds a few segments at most),
# SEGMENT_BYTES (sluice's queue.segment_bytes, default 64MiB: a run of 2M
# samples fills one segment, so segments are never released and reused in
# it; e.g. 8MiB makes a run rotate through several, as a long-running relay does),
# EXPORT_CONCURRENCY (the sluice exporter's concurrency, default 1: one request
# per endpoint at a time; above 1 lanes, records split by series and each lane
# snappy-encoded again), OLD_EXPORT_CONCURRENCY (sluice-old's, default
# EXPORT_CONCURRENCY: OLD_BIN=the same binary with another value measures what
# lanes cost, alternated round by round),
# PROFILE=1 (sluice admin.pprof, a CPU profile of PROFILE_SECONDS (default 15) from the
# start of each sluice run of round 1, relay and lake; set it to cover the run; and the relay's
# allocation profile at the end of its run), SLUICE_BIN, KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

SAMPLES="${SAMPLES:-2000000}"
SHAPES="${SHAPES:-1500:8 100:6}"
WORKERS="${WORKERS:-4}"
RELAY_CPU="${RELAY_CPU:-0}"
GEN_CPU="${GEN_CPU:-1}"
ONLY="${ONLY:-}"
PROFILE="${PROFILE:-0}"
TIMEOUT="${TIMEOUT:-300}"
ROUNDS="${ROUNDS:-3}"
OLD_BIN="${OLD_BIN:-}"

command -v vmagent >/dev/null || [ -n "$ONLY" ] || {
  echo "vmagent not found: apt-get install -y victoria-metrics (or ONLY=sluice)" >&2; exit 2; }

work="$(mktemp -d /tmp/sluice-bench-relay.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

bin="${SLUICE_BIN:-}"
if [ -z "$bin" ]; then
  bin="$work/sluice"
  go build -o "$bin" ./cmd/sluice
fi
go test -c -o "$work/e2e.test" ./internal/e2e
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
now() { date +%s.%N; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # URL
  for _ in $(seq 1 300); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "not up: $1" >&2; return 1
}

echo "# sluice $(git describe --always --dirty 2>/dev/null || echo '?'), vmagent $(dpkg-query -W -f='${Version}' victoria-metrics 2>/dev/null || echo '?'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# remote write in and out (1.0 unless a shape says 2), $SAMPLES samples per run, $WORKERS sender workers; relay on core $RELAY_CPU (GOMAXPROCS=1), load + null sink on core $GEN_CPU"

# One sink for every run; its count is read before and after each.
taskset -c "$GEN_CPU" env GOMAXPROCS=1 SLUICE_BENCH_RELAY_SINK="$work/sink.addr" "$work/e2e.test" -test.run '^TestRelaySink$' >"$work/sink.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 1200); do [ -s "$work/sink.addr" ] && break; sleep 0.1; done
[ -s "$work/sink.addr" ] || { echo "the sink did not start:" >&2; cat "$work/sink.log" >&2; exit 1; }
sink="$(cat "$work/sink.addr")"
sink_count() { curl -fsS "http://${1:-$sink}/count" | awk '{print $1}'; }

# shape_fields SHAPE: sets per, labels, proto (1 or 2) and tag (per, plus v2).
shape_fields() {
  IFS=: read -r per labels proto <<<"$1"
  proto=${proto:-1}
  tag=$per; [ "$proto" = 2 ] && tag=${per}v2
  return 0
}

# run_relay NAME PID INPUT_URL SHAPE ROUND: drive the load, print the result
# line, and keep the rate for the summary.
run_relay() {
  local name=$1 pid=$2 url=$3 round=$5 counted=${6:-$sink} per labels proto tag
  shape_fields "$4"
  local total=$(( SAMPLES / per * per ))
  local base c0 c1 t0 t1 got
  base=$(sink_count "$counted")
  c0=$(cpu_ticks "$pid"); t0=$(now)
  taskset -c "$GEN_CPU" env SLUICE_BENCH_RELAY_TARGET="$url" SLUICE_BENCH_RELAY_SAMPLES="$SAMPLES" \
    SLUICE_BENCH_RELAY_PER_REQ="$per" SLUICE_BENCH_RELAY_LABELS="$labels" SLUICE_BENCH_RELAY_WORKERS="$WORKERS" SLUICE_BENCH_RELAY_PROTO="$proto" \
    "$work/e2e.test" -test.run '^TestRelayLoad$' >"$work/load-$name-$tag.log" 2>&1 || { cat "$work/load-$name-$tag.log" >&2; exit 1; }
  for _ in $(seq 1 $(( TIMEOUT * 20 ))); do
    got=$(( $(sink_count "$counted") - base ))
    [ "$got" -ge "$total" ] && break
    sleep 0.05
  done
  t1=$(now); c1=$(cpu_ticks "$pid")
  [ "$got" -ge "$total" ] || { echo "$name: the sink got $got of $total samples" >&2; exit 1; }
  awk -v n="$total" -v hz="$hz" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v name="$name" -v per="$per" -v labels="$labels" -v got="$got" -v proto="$proto" -v round="$round" -v rates="$work/rates" 'BEGIN {
    cpu = (c1 - c0) / hz
    printf "%-10s %5d samples/request, %2d labels, remote write %d.0: %9.0f samples per CPU-second (%.2f CPU-s for %d samples, %.1f s wall, %.0f%% of a core; sink got %d)\n", name, per, labels, proto, n / cpu, cpu, n, t1 - t0, 100 * cpu / (t1 - t0), got
    printf "%s %d %d %d %s %.0f\n", name, per, labels, proto, round, n / cpu >>rates
  }'
}

# run_sluice NAME BIN SHAPE ROUND: one sluice relay run (a fresh process and
# queue), with a CPU profile in round 1 when PROFILE=1.
run_sluice() {
  local name=$1 sbin=$2 shape=$3 round=$4 per labels proto tag qport aport spid prof="" conc=${EXPORT_CONCURRENCY:-1}
  [ "$name" != sluice-old ] || conc=${OLD_EXPORT_CONCURRENCY:-$conc}
  shape_fields "$shape"
  qport=$(freeport); aport=$(freeport)
  cat >"$work/sluice.yaml" <<EOF
receivers:
  otlp: {grpc_addr: "", http_addr: "127.0.0.1:0"}
  prometheus_remote_write: {listen: "127.0.0.1:$qport", max_concurrent_requests: 8}
admin: {addr: "127.0.0.1:$aport", pprof: $([ "$PROFILE" = 1 ] && echo true || echo false)}
query: {addr: ""}
lake: {root: $work/lake}
queue: {dir: $work/queue-$name-$tag-$round, max_bytes: 4GiB, group_commit_delay: ${GROUP_COMMIT_DELAY:-1ms}$([ -n "${MIN_FREE_BYTES:-}" ] && echo ", min_free_bytes: $MIN_FREE_BYTES")$([ -n "${SEGMENT_BYTES:-}" ] && echo ", segment_bytes: $SEGMENT_BYTES")}
exporters:
  prometheus_remote_write/sink:
    endpoints: [http://$sink/api/v1/write]
    protocol: "$proto.0"
    batch_delay: 50ms
    concurrency: $conc
pipelines:
  metrics: {receivers: [prometheus_remote_write], exporters: [prometheus_remote_write/sink]}
log: {level: warn}
EOF
  taskset -c "$RELAY_CPU" env GOMAXPROCS=1 "$sbin" run --config "$work/sluice.yaml" >"$work/$name.out" 2>"$work/$name.err" &
  spid=$!; pids+=($spid)
  wait_http "http://127.0.0.1:$aport/readyz" || { cat "$work/$name.err" >&2; exit 1; }
  if [ "$PROFILE" = 1 ] && [ "$round" = 1 ]; then
    curl -fsS -o "$work/cpu-$name-$tag.prof" "http://127.0.0.1:$aport/debug/pprof/profile?seconds=${PROFILE_SECONDS:-15}" & prof=$!
  fi
  run_relay "$name" "$spid" "http://127.0.0.1:$qport/api/v1/write" "$shape" "$round"
  # Where the per-request cost goes: appends (requests acknowledged) per fsync.
  curl -fsS "http://127.0.0.1:$aport/metrics" | awk '$1 == "sluice_queue_appends_total" {a = $2} $1 == "sluice_queue_fsyncs_total" {f = $2}
    END {if (f > 0) printf "         queue: %d appends, %d fsyncs (%.2f appends per fsync)\n", a, f, a / f}'
  if [ -n "$prof" ]; then
    wait "$prof" || true
    local out=relay-$tag
    [ "$name" = sluice ] || out=relay-$name-$tag
    mkdir -p bench-profiles; cp "$work/cpu-$name-$tag.prof" "bench-profiles/$out-cpu.prof"; cp "$sbin" "bench-profiles/$name-bin"
    [ "$name" != sluice ] || cp "$sbin" bench-profiles/relay-sluice
    curl -fsS -o "bench-profiles/$out-allocs.prof" "http://127.0.0.1:$aport/debug/pprof/allocs" || true
    echo "         CPU profile: go tool pprof -top bench-profiles/$name-bin bench-profiles/$out-cpu.prof"
    echo "         allocations: go tool pprof -sample_index=alloc_objects -top bench-profiles/$name-bin bench-profiles/$out-allocs.prof"
  fi
  kill -TERM "$spid"; wait "$spid" || true
}

# run_vmagent SHAPE ROUND: one vmagent relay run (a fresh process and buffer).
run_vmagent() {
  local shape=$1 round=$2 per labels proto tag vport vpid
  shape_fields "$shape"
  vport=$(freeport)
  taskset -c "$RELAY_CPU" env GOMAXPROCS=1 vmagent -httpListenAddr="127.0.0.1:$vport" -remoteWrite.url="http://$sink/api/v1/write" \
    -remoteWrite.tmpDataPath="$work/vmagent-$tag-$round" -loggerLevel=ERROR >"$work/vmagent.log" 2>&1 &
  vpid=$!; pids+=($vpid)
  wait_http "http://127.0.0.1:$vport/health"
  run_relay vmagent "$vpid" "http://127.0.0.1:$vport/api/v1/write" "$shape" "$round"
  kill -TERM "$vpid"; wait "$vpid" || true
}

# run_floor SHAPE ROUND: the load straight into a second null sink pinned
# where the relays run: a Go net/http server that reads, snappy-decodes and
# decodes each request (prw.Decoder into a batch) and answers, with no queue
# and nothing forwarded. Its rate is a ceiling for any relay built on
# net/http that looks inside each request, on this machine.
run_floor() {
  local shape=$1 round=$2 fpid faddr
  rm -f "$work/floor.addr"
  taskset -c "$RELAY_CPU" env GOMAXPROCS=1 SLUICE_BENCH_RELAY_SINK="$work/floor.addr" "$work/e2e.test" -test.run '^TestRelaySink$' >"$work/floor.log" 2>&1 &
  fpid=$!; pids+=($fpid)
  for _ in $(seq 1 1200); do [ -s "$work/floor.addr" ] && break; sleep 0.1; done
  [ -s "$work/floor.addr" ] || { echo "the floor sink did not start:" >&2; cat "$work/floor.log" >&2; exit 1; }
  faddr="$(cat "$work/floor.addr")"
  run_relay floor "$fpid" "http://$faddr/api/v1/write" "$shape" "$round" "$faddr"
  kill -TERM "$fpid"; wait "$fpid" 2>/dev/null || true
}

# Each round runs every relay once on the same load, one after the other
# (the order rotates from round to round), so a change in the machine's
# load between runs moves one round's ratio, not the median.
for shape in $SHAPES; do
  shape_fields "$shape"
  relays=()
  if [ -z "$ONLY" ] || [ "$ONLY" = sluice ]; then
    relays+=(sluice)
    [ -z "$OLD_BIN" ] || relays+=(sluice-old)
  fi
  if [ "$proto" = 2 ] && [ "$ONLY" != sluice ]; then
    echo "vmagent  $per samples/request, remote write 2.0: skipped (vmagent 1.79 takes remote write 1.0 only)"
  elif [ -z "$ONLY" ] || [ "$ONLY" = vmagent ]; then
    relays+=(vmagent)
  fi
  [ "${FLOOR:-0}" != 1 ] || relays+=(floor)
  n=${#relays[@]}
  for round in $(seq 1 "$ROUNDS"); do
    echo "# round $round/$ROUNDS, $per samples/request x $labels labels, remote write $proto.0: load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
    for k in $(seq 0 $(( n - 1 ))); do
      r=${relays[$(( (k + round - 1) % n ))]}
      case $r in
        sluice) run_sluice sluice "$bin" "$shape" "$round" ;;
        sluice-old) run_sluice sluice-old "$OLD_BIN" "$shape" "$round" ;;
        vmagent) run_vmagent "$shape" "$round" ;;
        floor) run_floor "$shape" "$round" ;;
      esac
    done
    echo "# round $round/$ROUNDS: load average $(cut -d' ' -f1-3 /proc/loadavg) at end"
  done
done

# Remote write -> lake (LAKE=1): sluice with the default pipeline (everything
# into the lake), CPU until every acknowledged record is committed.
if [ "${LAKE:-0}" = 1 ]; then
  for shape in $SHAPES; do
    shape_fields "$shape"
    total=$(( SAMPLES / per * per ))
    qport=$(freeport); aport=$(freeport)
    cat >"$work/lake.yaml" <<EOF
receivers:
  otlp: {grpc_addr: "", http_addr: "127.0.0.1:0"}
  prometheus_remote_write: {listen: "127.0.0.1:$qport", max_concurrent_requests: 8}
admin: {addr: "127.0.0.1:$aport", pprof: $([ "$PROFILE" = 1 ] && echo true || echo false)}
query: {addr: ""}
upkeep: {enabled: false}
lake: {root: $work/lake-$tag, flush_interval: 5s}
queue: {max_bytes: 4GiB}
log: {level: warn}
EOF
    taskset -c "$RELAY_CPU" env GOMAXPROCS=1 "$bin" run --config "$work/lake.yaml" >"$work/lake.out" 2>"$work/lake.err" &
    lpid=$!; pids+=($lpid)
    wait_http "http://127.0.0.1:$aport/readyz" || { cat "$work/lake.err" >&2; exit 1; }
    metric() { curl -fsS "http://127.0.0.1:$aport/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%.0f\n", s}'; }
    prof=""
    if [ "$PROFILE" = 1 ]; then
      curl -fsS -o "$work/lake-cpu-$tag.prof" "http://127.0.0.1:$aport/debug/pprof/profile?seconds=${PROFILE_SECONDS:-15}" & prof=$!
    fi
    c0=$(cpu_ticks "$lpid"); t0=$(now)
    taskset -c "$GEN_CPU" env SLUICE_BENCH_RELAY_TARGET="http://127.0.0.1:$qport/api/v1/write" SLUICE_BENCH_RELAY_SAMPLES="$SAMPLES" \
      SLUICE_BENCH_RELAY_PER_REQ="$per" SLUICE_BENCH_RELAY_LABELS="$labels" SLUICE_BENCH_RELAY_WORKERS="$WORKERS" SLUICE_BENCH_RELAY_PROTO="$proto" \
      "$work/e2e.test" -test.run '^TestRelayLoad$' >"$work/load-lake-$tag.log" 2>&1 || { cat "$work/load-lake-$tag.log" >&2; exit 1; }
    for _ in $(seq 1 $(( TIMEOUT * 10 ))); do
      rows=$(metric sluice_lake_written_rows_total); durable=$(metric sluice_queue_durable_position); committed=$(metric sluice_lake_committed_queue_position)
      [ "$rows" -ge "$total" ] && [ "$committed" -ge "$durable" ] && break
      sleep 0.1
    done
    t1=$(now); c1=$(cpu_ticks "$lpid")
    [ "$rows" -ge "$total" ] || { echo "lake: $rows of $total rows written" >&2; exit 1; }
    awk -v n="$total" -v hz="$hz" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v per="$per" -v labels="$labels" -v proto="$proto" 'BEGIN {
      cpu = (c1 - c0) / hz
      printf "lake     %5d samples/request, %2d labels, remote write %d.0: %9.0f samples per CPU-second into the lake, all committed (%.2f CPU-s for %d samples, %.1f s wall)\n", per, labels, proto, n / cpu, cpu, n, t1 - t0
    }'
    if [ -n "$prof" ]; then
      wait "$prof" || true
      mkdir -p bench-profiles; cp "$work/lake-cpu-$tag.prof" "bench-profiles/lake-$tag-cpu.prof"; cp "$bin" bench-profiles/relay-sluice
      echo "         CPU profile: go tool pprof -top bench-profiles/relay-sluice bench-profiles/lake-$tag-cpu.prof"
    fi
    kill -TERM "$lpid"; wait "$lpid" || true
  done
fi

# Per shape: each round's ratio of sluice to vmagent (and to sluice-old), and
# the median over the rounds of each relay's rate and of the ratios.
if [ -s "$work/rates" ]; then awk '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) {t = a[j]; a[j] = a[j-1]; a[j-1] = t}
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    shape = sprintf("%5d samples/request, %2d labels, remote write %d.0", $2, $3, $4)
    if (!(shape in seen)) {seen[shape] = 1; order[++nshape] = shape}
    rate[shape, $1, $5] = $6; rounds[shape] = rounds[shape] > $5 ? rounds[shape] : $5
    has[shape, $1] = 1
  }
  END {
    print "# summary (samples per CPU-second; median of the rounds)"
    for (k = 1; k <= nshape; k++) {
      s = order[k]
      split("sluice sluice-old vmagent floor", names, " ")
      for (q = 1; q <= 4; q++) {
        nm = names[q]; if (!has[s, nm]) continue
        l = ""; for (r = 1; r <= rounds[s]; r++) if ((s, nm, r) in rate) l = l " " rate[s, nm, r]
        printf "%-10s %s: median %9.0f (rounds:%s)\n", nm, s, median(l), l
      }
      for (q = 2; q <= 4; q++) {
        nm = names[q]; if (!has[s, "sluice"] || !has[s, nm]) continue
        l = ""; rs = ""
        for (r = 1; r <= rounds[s]; r++) if ((s, nm, r) in rate && (s, "sluice", r) in rate && rate[s, nm, r] > 0) {
          x = rate[s, "sluice", r] / rate[s, nm, r]; l = l " " x; rs = rs sprintf(" %.2fx", x)
        }
        printf "ratio sluice/%-10s %s: median %.2fx (rounds:%s)\n", nm, s, median(l), rs
      }
    }
  }' "$work/rates"
fi
