#!/usr/bin/env bash
# Peak RSS and speed of `sluice compact` as its input grows: the corpus is
# ingested N times (small files) until the lake holds about SIZE_MB of
# Parquet, then `/usr/bin/time -v sluice compact` merges it.
# usage: [COMPACT_FLAGS=...] [GOMAXPROCS=1] scripts/bench-compact-rss.sh [SIZE_MB...]   (default: 250 1000)
#   SLUICE_BIN=path   compact with this binary instead of building ./cmd/sluice
#                     (ingest still uses the built one), to compare two builds
#   LAKE_CACHE=dir    keep the ingested lakes in dir and reuse them next time
#                     (ingesting 1 GB takes longer than compacting it); each
#                     run compacts a copy
set -euo pipefail
cd "$(dirname "$0")/.."
corpus="${SLUICE_CORPUS:-../shared/corpus}/otlp"
[ -d "$corpus" ] || { echo "bench-compact-rss: corpus not found at $corpus" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-compact-rss: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(250 1000)

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
go build -o "$work/sluice" ./cmd/sluice
ingest() { "$work/sluice" ingest --progress never --target-file-size 8388608 --lake "$1" "$corpus" > /dev/null; }
ingest "$work/one"
bin="${SLUICE_BIN:-$work/sluice}"
once=$(du -sb --exclude=catalog.db\* "$work/one" | cut -f1)
printf '%-10s %-8s %-9s %-12s %-14s %-10s %s\n' "input_MB" "copies" "segments" "rows" "peak_RSS_MB" "seconds" "rows/s"
for mb in "${sizes[@]}"; do
  copies=$(( (mb * 1000000 + once - 1) / once ))
  lake="$work/lake-$mb"
  if [ -n "${LAKE_CACHE:-}" ]; then
    cached="$LAKE_CACHE/lake-$mb"
    if [ ! -f "$cached/.complete" ]; then
      rm -rf "$cached"; mkdir -p "$LAKE_CACHE"
      for ((i = 0; i < copies; i++)); do ingest "$cached"; done
      touch "$cached/.complete"
    fi
    cp -a "$cached" "$lake" && rm -f "$lake/.complete"
  else
    for ((i = 0; i < copies; i++)); do ingest "$lake"; done
  fi
  segs=$("$work/sluice" lake ls --lake "$lake" | tail -1 | awk '{print $1}')
  in=$(du -sb --exclude=catalog.db\* "$lake" | cut -f1)
  /usr/bin/time -v -o "$work/time.txt" "$bin" compact ${COMPACT_FLAGS:-} --grace 1h --lake "$lake" > "$work/out.txt" 2> "$work/err.txt"
  rss=$(awk -F: '/Maximum resident set size/ {print int($2/1024)}' "$work/time.txt")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
  # Rows merged over all passes: the summary's "jobs: N rows" (older CLI),
  # else the progress bar's last "N rows in" (rounded, e.g. 52M).
  rows=$(grep -o 'partitions in [0-9]* jobs: [0-9]* rows' "$work/out.txt" | awk '{print $5}' || true)
  if [ -z "$rows" ]; then
    rows=$(tr '\r' '\n' < "$work/err.txt" | grep -oE '[0-9.]+[KMG]? rows in' | tail -1 |
      awk '{ n = $1; m = 1; if (n ~ /K$/) m = 1e3; if (n ~ /M$/) m = 1e6; if (n ~ /G$/) m = 1e9; sub(/[KMG]$/, "", n); printf "%.0f", n * m }' || true)
  fi
  wall=$(awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }' <<< "$secs")
  printf '%-10s %-8s %-9s %-12s %-14s %-10s %s\n' "$(( in / 1000000 ))" "$copies" "$segs" "$rows" "$rss" "$secs" \
    "$(awk -v r="$rows" -v w="$wall" 'BEGIN { printf "%.0f", r / w }')"
  rm -rf "$lake"
done
