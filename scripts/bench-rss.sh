#!/usr/bin/env bash
# Peak RSS of `sluice ingest` as the input grows: the corpus is decompressed
# once and linked N times so that each run reads about SIZE_MB of OTLP.
# usage: [INGEST_FLAGS="--max-buffered-bytes 268435456"] scripts/bench-rss.sh [SIZE_MB...]   (default: 256 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
corpus="${SLUICE_CORPUS:-../shared/corpus}/otlp"
[ -d "$corpus" ] || { echo "bench-rss: corpus not found at $corpus" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-rss: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(256 1024)

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
go build -o "$work/sluice" ./cmd/sluice
mkdir -p "$work/plain"
for f in "$corpus"/*/*; do
  kind=$(basename "$(dirname "$f")"); base=$(basename "$f" .gz)
  mkdir -p "$work/plain/$kind"
  if [[ $f == *.gz ]]; then gzip -dc "$f" > "$work/plain/$kind/$base"; else cp "$f" "$work/plain/$kind/$base"; fi
done
once=$(du -sbL "$work/plain" | cut -f1)
printf '%-10s %-8s %-12s %-14s %s\n' "input_MB" "copies" "records" "peak_RSS_MB" "seconds"
for mb in "${sizes[@]}"; do
  copies=$(( (mb * 1000000 + once - 1) / once ))
  in="$work/in-$mb"; mkdir -p "$in"
  for ((i = 0; i < copies; i++)); do
    for f in "$work"/plain/*/*; do ln -s "$f" "$in/$i-$(basename "$(dirname "$f")")-$(basename "$f")"; done
  done
  rm -rf "$work/lake"
  /usr/bin/time -v -o "$work/time.txt" "$work/sluice" ingest ${INGEST_FLAGS:-} --progress never --lake "$work/lake" "$in" > "$work/out.txt"
  rss=$(awk -F: '/Maximum resident set size/ {print int($2/1024)}' "$work/time.txt")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time.txt")
  recs=$(grep -o '[0-9]* logs, [0-9]* data points, [0-9]* spans' "$work/out.txt")
  printf '%-10s %-8s %-12s %-14s %s\n' "$(( copies * once / 1000000 ))" "$copies" "$(echo "$recs" | awk '{print $1+$3+$6}')" "$rss" "$secs"
done
