#!/usr/bin/env python3
"""Independent check of metrics_rollup against the raw metrics table.

DuckDB reads the raw `metrics` Parquet files and computes every rollup
window itself: windows are epoch-floored timestamps (t - t % tier), grouped
by tenant and series_id, with counts, sums, minima, maxima, first/last
values, the reset-aware increase of counters (lag() over the window) and
histogram aggregates. The result must equal the `metrics_rollup` rows:
counts, minima, maxima, first and last exactly; sums and increases exactly
or within 1e-9 relative (floating-point sums in another order). No code is
shared with sluice.

Only live files are read: the lake's SQLite catalog (catalog.db) lists
them; replaced files wait on disk for the sweeper and must not count.

usage: rollup_check.py --lake DIR [--tiers 1m,5m,1h]
Prints a JSON summary and exits non-zero on any difference.
"""
import argparse
import json
import math
import os
import sqlite3
import sys

import duckdb

TIER_SECONDS = {"s": 1, "m": 60, "h": 3600}


def tier_ns(name):
    return int(name[:-1]) * TIER_SECONDS[name[-1]] * 1_000_000_000


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--tiers", default="1m,5m,1h")
    args = ap.parse_args()
    tiers = args.tiers.split(",")
    con = duckdb.connect()
    lake = args.lake
    cat = sqlite3.connect(f"file:{os.path.join(lake, 'catalog.db')}?mode=ro", uri=True)

    def live(table):
        paths = [os.path.join(lake, p) for (p,) in cat.execute(
            "SELECT path FROM segments WHERE table_name = ? AND replaced_ns IS NULL ORDER BY path", (table,))]
        if not paths:
            sys.exit(f"no live {table} segments in the catalog")
        return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
    # Raw points with a timestamp inside their partition hour: what a
    # rollup covers (docs/schema.md, metrics_rollup).
    con.execute(f"""
    CREATE TEMP TABLE raw AS
    SELECT tenant, series_id, metric_type, temporality, is_monotonic,
           epoch_ns(timestamp) AS t,
           coalesce(CAST(value_int AS DOUBLE), value) AS v,
           "count" AS hc, "sum" AS hs, "min" AS hmin, "max" AS hmax,
           bucket_counts, explicit_bounds
    FROM read_parquet({live('metrics')}, hive_partitioning = true, union_by_name = true)
    WHERE timestamp IS NOT NULL
      AND epoch_ns(timestamp) // 3600000000000
          = epoch_ns(CAST(CAST(dt AS DATE) AS TIMESTAMP)) // 3600000000000 + CAST(hour AS BIGINT)
    """)
    con.execute(f"""
    CREATE TEMP TABLE ru AS
    SELECT tenant, tier, series_id, epoch_ns(window_start) AS w, points, "count" AS cnt, "sum" AS s,
           "min" AS mn, "max" AS mx, "first" AS f, "last" AS l, increase, resets,
           bucket_counts, explicit_bounds, bounds_mismatch
    FROM read_parquet({live('metrics_rollup')}, hive_partitioning = true, union_by_name = true)
    """)
    problems = []
    summary = {"raw_points": con.execute("SELECT count(*) FROM raw").fetchone()[0], "tiers": {}}
    dups = con.execute("SELECT tier, series_id, w, count(*) FROM ru GROUP BY ALL HAVING count(*) > 1 LIMIT 5").fetchall()
    if dups:
        problems.append(f"duplicate rollup rows (tier, series, window): {dups}")
    for tier in tiers:
        ns = tier_ns(tier)
        misaligned = con.execute(f"SELECT count(*) FROM ru WHERE tier = '{tier}' AND w % {ns} <> 0").fetchone()[0]
        if misaligned:
            problems.append(f"{tier}: {misaligned} windows not aligned to the tier")
        win = f"(t - t % {ns})"
        numeric = f"""
        SELECT tenant, series_id, {win} AS w, count(*) AS points,
               count(v) FILTER (WHERE NOT isnan(v)) AS cnt,
               sum(v) FILTER (WHERE NOT isnan(v)) AS s,
               min(v) FILTER (WHERE NOT isnan(v)) AS mn,
               max(v) FILTER (WHERE NOT isnan(v)) AS mx,
               arg_min(v, [t::DOUBLE, v]) FILTER (WHERE NOT isnan(v)) AS f,
               arg_max(v, [t::DOUBLE, v]) FILTER (WHERE NOT isnan(v)) AS l
        FROM raw WHERE metric_type IN ('gauge', 'sum') GROUP BY ALL"""
        counters = f"""
        SELECT tenant, series_id, w,
               sum(CASE WHEN pv IS NULL THEN 0 WHEN v >= pv THEN v - pv ELSE v END) AS inc,
               count(*) FILTER (WHERE v < pv) AS resets
        FROM (SELECT tenant, series_id, {win} AS w, v,
                     lag(v) OVER (PARTITION BY tenant, series_id, {win} ORDER BY t, v) AS pv
              FROM raw WHERE metric_type = 'sum' AND temporality = 'cumulative' AND is_monotonic
                   AND v IS NOT NULL AND NOT isnan(v))
        GROUP BY ALL"""
        delta_hist = f"""
        SELECT tenant, series_id, {win} AS w, count(*) AS points, sum(hc) AS cnt, sum(hs) AS s,
               min(hmin) AS mn, max(hmax) AS mx,
               count(DISTINCT explicit_bounds) AS nbounds, list(bucket_counts) AS bl, any_value(explicit_bounds) AS bounds
        FROM raw WHERE metric_type = 'histogram' AND temporality = 'delta' GROUP BY ALL"""
        cum_hist = f"""
        SELECT tenant, series_id, {win} AS w, count(*) AS points, arg_max(hc, t) AS cnt, arg_max(hs, t) AS s,
               arg_max(bucket_counts, t) AS bc
        FROM raw WHERE metric_type = 'histogram' AND temporality = 'cumulative' GROUP BY ALL"""
        got = {}
        for r in con.execute(f"SELECT tenant, series_id, w, points, cnt, s, mn, mx, f, l, increase, resets, bucket_counts, bounds_mismatch FROM ru WHERE tier = '{tier}'").fetchall():
            got[(r[0], r[1], r[2])] = r[3:]
        want_keys = set()
        n_exact_sum = n_sum = 0

        def cmp(key, field, want, have, exact=False):
            same = close(want, have)
            if exact and same and isinstance(want, float) and not math.isnan(want):
                same = want == have
            if not same:
                if len(problems) < 40:
                    problems.append(f"{tier} tenant={key[0]} series={key[1]} window={key[2]}: {field} = {have!r}, DuckDB says {want!r}")
                return False
            return True

        for r in con.execute(numeric).fetchall():
            key = (r[0], r[1], r[2])
            want_keys.add(key)
            g = got.get(key)
            if g is None:
                problems.append(f"{tier}: window {key} missing from metrics_rollup")
                continue
            for field, want, have in (("points", r[3], g[0]), ("count", r[4], g[1]), ("min", r[6], g[3]),
                                      ("max", r[7], g[4]), ("first", r[8], g[5]), ("last", r[9], g[6])):
                if want is None and field in ("min", "max", "first", "last") and have is None:
                    continue
                if field == "count" and r[4] == 0:
                    want = None  # no value in the window: count is null
                cmp(key, field, want, have, exact=True)
            n_sum += 1
            if r[5] == g[2]:
                n_exact_sum += 1
            cmp(key, "sum", r[5], g[2])
        for r in con.execute(counters).fetchall():
            key = (r[0], r[1], r[2])
            g = got.get(key)
            if g is None:
                continue
            cmp(key, "increase", float(r[3]), g[7])
            cmp(key, "resets", r[4], g[8])
        for r in con.execute(delta_hist).fetchall():
            key = (r[0], r[1], r[2])
            want_keys.add(key)
            g = got.get(key)
            if g is None:
                problems.append(f"{tier}: histogram window {key} missing from metrics_rollup")
                continue
            for field, want, have in (("points", r[3], g[0]), ("count", r[4], g[1]), ("sum", r[5], g[2]),
                                      ("min", r[6], g[3]), ("max", r[7], g[4])):
                cmp(key, field, want, have)
            lists = [b for b in r[9] if b]
            lens = {len(b) for b in lists}
            if r[8] <= 1 and len(lens) <= 1:
                want_b = [sum(col) for col in zip(*lists)] if lists else None
                cmp(key, "bucket_counts", want_b, g[9])
                cmp(key, "bounds_mismatch", False, g[10])
            else:
                cmp(key, "bucket_counts (bounds differ)", None, g[9])
                cmp(key, "bounds_mismatch", True, g[10])
        for r in con.execute(cum_hist).fetchall():
            key = (r[0], r[1], r[2])
            want_keys.add(key)
            g = got.get(key)
            if g is None:
                problems.append(f"{tier}: histogram window {key} missing from metrics_rollup")
                continue
            for field, want, have in (("points", r[3], g[0]), ("count", r[4], g[1]), ("sum", r[5], g[2]),
                                      ("bucket_counts", r[6] or None, g[9])):
                cmp(key, field, want, have)
        # Every rollup row of the checked types has a raw window.
        checked = con.execute(f"""SELECT tenant, series_id, w FROM ru WHERE tier = '{tier}'
            AND series_id IN (SELECT series_id FROM raw WHERE metric_type IN ('gauge', 'sum', 'histogram'))""").fetchall()
        extra = [k for k in checked if k not in want_keys]
        if extra:
            problems.append(f"{tier}: {len(extra)} rollup windows without raw points, e.g. {extra[:3]}")
        summary["tiers"][tier] = {"windows": len(got), "checked": len(want_keys), "sums_bit_exact": n_exact_sum, "sums": n_sum}
    summary["problems"] = len(problems)
    print(json.dumps(summary))
    for p in problems[:40]:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
