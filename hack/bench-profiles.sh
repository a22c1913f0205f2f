#!/usr/bin/env bash
# bench-profiles.sh DIR: summarise the CPU and heap profiles a bench run saved
# in DIR/profiles as text (top functions, flat and cumulative), per scale.
set -euo pipefail
dir=$1/profiles
[ -d "$dir" ] || exit 0
for cpu in $(ls "$dir" | sed -n 's/^\(.*-\(cold\|steady\|one\|stats\|restart\)\)-cpu-[0-9]*\.pb\.gz$/\1/p' | sort -u); do
  go tool pprof -top -nodecount=40 "$dir/$cpu"-cpu-*.pb.gz > "$dir/$cpu-cpu-top.txt" 2>/dev/null || true
  go tool pprof -top -cum -nodecount=40 "$dir/$cpu"-cpu-*.pb.gz > "$dir/$cpu-cpu-cum.txt" 2>/dev/null || true
done
for heap in "$dir"/*-heap.pb.gz; do
  [ -e "$heap" ] || continue
  go tool pprof -top -sample_index=inuse_space -nodecount=30 "$heap" > "${heap%.pb.gz}-top.txt" 2>/dev/null || true
done
