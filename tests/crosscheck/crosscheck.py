#!/usr/bin/env python3
"""Independent end-to-end check of a sluice lake against its OTLP input.

The OTLP files are decoded with the official Python protobuf bindings
(opentelemetry-proto), the lake is read with pyarrow and DuckDB, and every
record must be found in the lake with the same fields and attributes (same
keys, same value types, same values). Nothing here shares code with sluice.

usage: crosscheck.py --lake DIR [--tenant T] FILE|DIR...
Prints a summary and exits non-zero on any difference.
"""
import argparse
import base64
import collections
import gzip
import json
import math
import os
import sys
import urllib.parse

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

ATTR_PREFIXES = ("resource.", "scope.", "attr.")


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def load_requests(paths, forced_kind=None):
    """Yield (kind, request) for every OTLP file; the kind comes from the
    corpus folder name (logs/metrics/traces) unless forced."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, n) for n in sorted(names)]
        else:
            files.append(p)
    for path in sorted(files):
        data = read_file(path)
        kind = forced_kind or ("logs" if "/logs" in path else "metrics" if "/metrics" in path else "traces")
        msg = {
            "logs": logs_service_pb2.ExportLogsServiceRequest,
            "metrics": metrics_service_pb2.ExportMetricsServiceRequest,
            "traces": trace_service_pb2.ExportTraceServiceRequest,
        }[kind]()
        msg.ParseFromString(data)
        yield kind, msg


def fnum(x):
    """A float as a hashable, NaN-safe value."""
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    return float(x)


def any_value(v):
    """OTLP AnyValue -> (type, comparable value)."""
    which = v.WhichOneof("value")
    if which is None:
        return ("empty", None)
    if which == "string_value":
        return ("string", v.string_value)
    if which == "bool_value":
        return ("bool", bool(v.bool_value))
    if which == "int_value":
        return ("int", int(v.int_value))
    if which == "double_value":
        return ("double", fnum(v.double_value))
    if which == "bytes_value":
        return ("bytes", bytes(v.bytes_value))
    kind = "array" if which == "array_value" else "map"
    return (kind, canon_json(json_format.MessageToDict(v)))


def canon_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def attrs_of(kvs):
    out = {}
    for kv in kvs:
        out[kv.key] = any_value(kv.value)  # last duplicate wins, as in sluice
    return out


def freeze(d):
    return tuple(sorted(d.items(), key=lambda kv: kv[0]))


def nested(msgs):
    """Repeated sub-messages (events, links, exemplars) as canonical bytes."""
    return tuple(m.SerializeToString(deterministic=True) for m in msgs)


def nested_json(text, cls):
    """The lake's OTLP JSON array of sub-messages as canonical bytes. OTLP JSON
    writes ids in hex where protobuf's JSON mapping expects base64."""
    out = []
    for obj in json.loads(text) if text else []:
        for k in ("traceId", "spanId"):
            if k in obj:
                obj[k] = base64.b64encode(bytes.fromhex(obj[k])).decode()
        out.append(json_format.ParseDict(obj, cls()).SerializeToString(deterministic=True))
    return tuple(out)


def hexid(b):
    return bytes(b).hex() if b and any(b) else None


# ---- lake side -------------------------------------------------------------

def parse_attr_column(name):
    """'attr.http.status_code#int' -> ('attr', 'http.status_code', 'int')."""
    for p in ATTR_PREFIXES:
        if name.startswith(p):
            rest = name[len(p):]
            typ = "string"
            if "#" in rest:
                rest, typ = rest.rsplit("#", 1)
            return p[:-1], urllib.parse.unquote(rest), typ
    return None


def lake_value(typ, v):
    if typ == "string":
        return ("string", v)
    if typ == "bool":
        return ("bool", bool(v))
    if typ == "int":
        return ("int", int(v))
    if typ == "double":
        return ("double", fnum(v))
    if typ == "bytes":
        return ("bytes", bytes(v))
    if typ == "empty":
        return ("empty", None)
    return (typ, canon_json(json.loads(v)))


def lake_rows(lake, table, tenant):
    """Every row of one table and tenant. Files are read one by one: each has
    the attribute columns its own rows use, and a dataset scan would keep
    only the first file's columns."""
    root = os.path.join(lake, table, "tenant=" + tenant)
    rows = []
    for d, _, names in os.walk(root):
        for n in sorted(names):
            if not n.endswith(".parquet") or n.startswith((".", "_")):
                continue
            t = pq.read_table(os.path.join(d, n))
            # Timestamps as int64 nanoseconds: Python datetimes stop at microseconds.
            for i, field in enumerate(t.schema):
                if pa.types.is_timestamp(field.type):
                    t = t.set_column(i, field.name, t.column(i).cast(pa.int64()))
            rows.extend(t.to_pylist())
    return rows


def split_attrs(row):
    scopes = {"resource": {}, "scope": {}, "attr": {}}
    for col, v in row.items():
        if v is None:
            continue
        parsed = parse_attr_column(col)
        if parsed is None:
            continue
        scope, key, typ = parsed
        scopes[scope][key] = lake_value(typ, v)
    if row.get("service_name") is not None:
        scopes["resource"]["service.name"] = ("string", row["service_name"])
    return scopes


def ts(v):
    """Lake timestamp (int64 ns or None) -> int ns (0 for null)."""
    return 0 if v is None else int(v)


def body_value(row):
    t = row.get("body_type") or "string"
    b = row.get("body")
    if b is None and t == "string":
        return ("empty", None)
    return lake_value(t, b)


# ---- fingerprints ----------------------------------------------------------

def otlp_logs(req):
    for rl in req.resource_logs:
        res = attrs_of(rl.resource.attributes)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                yield (
                    r.time_unix_nano, r.observed_time_unix_nano, r.severity_number, r.severity_text,
                    any_value(r.body), hexid(r.trace_id), hexid(r.span_id), r.flags,
                    sl.scope.name, sl.scope.version, freeze(res), freeze(attrs_of(sl.scope.attributes)),
                    freeze(attrs_of(r.attributes)),
                )


def lake_logs(row):
    a = split_attrs(row)
    return (
        ts(row["timestamp"]), ts(row["observed_timestamp"]), row["severity_number"] or 0,
        row["severity_text"] or "", body_value(row), row["trace_id"], row["span_id"], row["flags"] or 0,
        row["scope_name"] or "", row["scope_version"] or "",
        freeze(a["resource"]), freeze(a["scope"]), freeze(a["attr"]),
    )


def number_point(p):
    which = p.WhichOneof("value")
    if which == "as_int":
        return ("int", p.as_int)
    if which == "as_double":
        return ("double", fnum(p.as_double))
    return ("empty", None)


def otlp_metrics(req):
    for rm in req.resource_metrics:
        res = freeze(attrs_of(rm.resource.attributes))
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                which = m.WhichOneof("data")
                for row in otlp_metric_points(m, which, res):
                    data = getattr(m, which)
                    temporality = getattr(data, "aggregation_temporality", 0)
                    monotonic = getattr(data, "is_monotonic", False)
                    yield row[0] + (m.unit, temporality, monotonic, row[1].flags, nested(row[1].exemplars),
                                    fnum(row[1].min) if getattr(row[1], "HasField", None) and which in ("histogram", "exponential_histogram") and row[1].HasField("min") else None,
                                    fnum(row[1].max) if getattr(row[1], "HasField", None) and which in ("histogram", "exponential_histogram") and row[1].HasField("max") else None)


def otlp_metric_points(m, which, res):
    if True:
        if True:
            if True:
                if which in ("gauge", "sum"):
                    data = getattr(m, which)
                    for p in data.data_points:
                        yield (m.name, which, p.time_unix_nano, p.start_time_unix_nano, number_point(p),
                               None, None, (), (), res, freeze(attrs_of(p.attributes))), p
                elif which == "histogram":
                    for p in m.histogram.data_points:
                        yield (m.name, which, p.time_unix_nano, p.start_time_unix_nano, ("empty", None),
                               p.count, fnum(p.sum) if p.HasField("sum") else None,
                               tuple(p.bucket_counts), tuple(fnum(b) for b in p.explicit_bounds),
                               res, freeze(attrs_of(p.attributes))), p
                elif which == "exponential_histogram":
                    for p in m.exponential_histogram.data_points:
                        yield (m.name, which, p.time_unix_nano, p.start_time_unix_nano, ("empty", None),
                               p.count, fnum(p.sum) if p.HasField("sum") else None,
                               tuple(p.positive.bucket_counts), tuple(p.negative.bucket_counts),
                               res, freeze(attrs_of(p.attributes))), p
                elif which == "summary":
                    for p in m.summary.data_points:
                        yield (m.name, which, p.time_unix_nano, p.start_time_unix_nano, ("empty", None),
                               p.count, fnum(p.sum), tuple(fnum(q.quantile) for q in p.quantile_values),
                               tuple(fnum(q.value) for q in p.quantile_values),
                               res, freeze(attrs_of(p.attributes))), p


TEMPORALITY = {None: 0, "unspecified": 0, "delta": 1, "cumulative": 2}


def lake_metrics(row):
    extra = (row.get("unit") or "", TEMPORALITY[row.get("temporality")], bool(row.get("is_monotonic")),
             row.get("flags") or 0, nested_json(row.get("exemplars"), metrics_pb2.Exemplar),
             fnum(row["min"]) if row.get("min") is not None and row["metric_type"] != "summary" else None,
             fnum(row["max"]) if row.get("max") is not None and row["metric_type"] != "summary" else None)
    return lake_metric_point(row) + extra


def lake_metric_point(row):
    a = split_attrs(row)
    typ = row["metric_type"]
    if typ in ("gauge", "sum"):
        if row.get("value_int") is not None:
            num = ("int", row["value_int"])
        elif row.get("value") is not None:
            num = ("double", fnum(row["value"]))
        else:
            num = ("empty", None)
        return (row["metric_name"], typ, ts(row["timestamp"]), ts(row["start_timestamp"]), num,
                None, None, (), (), freeze(a["resource"]), freeze(a["attr"]))
    s = fnum(row["sum"]) if row.get("sum") is not None else None
    if typ == "histogram":
        x = tuple(row.get("bucket_counts") or ())
        y = tuple(fnum(b) for b in (row.get("explicit_bounds") or ()))
    elif typ == "exponential_histogram":
        x = tuple(row.get("exp_positive_bucket_counts") or ())
        y = tuple(row.get("exp_negative_bucket_counts") or ())
    else:
        x = tuple(fnum(q) for q in (row.get("quantiles") or ()))
        y = tuple(fnum(q) for q in (row.get("quantile_values") or ()))
        s = fnum(row["sum"]) if row.get("sum") is not None else 0.0
    return (row["metric_name"], typ, ts(row["timestamp"]), ts(row["start_timestamp"]), ("empty", None),
            row["count"], s, x, y, freeze(a["resource"]), freeze(a["attr"]))


def otlp_spans(req):
    for rs in req.resource_spans:
        res = freeze(attrs_of(rs.resource.attributes))
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield (hexid(s.trace_id), hexid(s.span_id), hexid(s.parent_span_id), s.name, s.kind,
                       s.start_time_unix_nano, s.end_time_unix_nano, s.status.code, s.status.message,
                       nested(s.events), nested(s.links), ss.scope.name, res, freeze(attrs_of(s.attributes)),
                       s.flags, s.trace_state, s.dropped_attributes_count, s.dropped_events_count,
                       s.dropped_links_count)


def lake_spans(row):
    a = split_attrs(row)
    return (row["trace_id"], row["span_id"], row["parent_span_id"], row["name"], row["kind"] or 0,
            ts(row["start_timestamp"]), ts(row["end_timestamp"]), row["status_code"] or 0,
            row["status_message"] or "", nested_json(row.get("events"), trace_pb2.Span.Event),
            nested_json(row.get("links"), trace_pb2.Span.Link), row["scope_name"] or "",
            freeze(a["resource"]), freeze(a["attr"]),
            row.get("flags") or 0, row.get("trace_state") or "", row.get("dropped_attributes_count") or 0,
            row.get("dropped_events_count") or 0, row.get("dropped_links_count") or 0)


def compare(name, want, got):
    w, g = collections.Counter(want), collections.Counter(got)
    missing = w - g
    extra = g - w
    print(f"{name}: {sum(w.values())} records in the OTLP input, {sum(g.values())} rows in the lake")
    for label, diff in (("missing from the lake", missing), ("in the lake but not in the input", extra)):
        if diff:
            print(f"  {sum(diff.values())} {label}, e.g.:")
            for rec in list(diff)[:3]:
                print("   ", repr(rec)[:2000])
    return not missing and not extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--tenant", default="default")
    ap.add_argument("--kind", choices=["logs", "metrics", "traces"], help="signal of every input file")
    ap.add_argument("--expect", action="append", default=[],
                    help="table=count, e.g. logs=6901; fail if the lake holds a different number")
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args()

    want = collections.defaultdict(list)
    for kind, req in load_requests(args.inputs, args.kind):
        fn = {"logs": otlp_logs, "metrics": otlp_metrics, "traces": otlp_spans}[kind]
        want[kind].extend(fn(req))

    ok = True
    for table, conv in (("logs", lake_logs), ("metrics", lake_metrics), ("traces", lake_spans)):
        rows = [conv(r) for r in lake_rows(args.lake, table, args.tenant)]
        ok &= compare(table, want[table], rows)

    con = duckdb.connect()
    for spec in args.expect:
        table, n = spec.split("=")
        got = con.execute(
            f"SELECT count(*) FROM read_parquet('{args.lake}/{table}/**/*.parquet', hive_partitioning=true) "
            f"WHERE tenant = ?", [args.tenant]).fetchone()[0]
        print(f"duckdb: {table} has {got} rows, expected {n}")
        ok &= got == int(n)
    if os.path.isdir(os.path.join(args.lake, "logs")):
        by_service = collections.Counter(r[10] and dict(r[10]).get("service.name", (None, None))[1]
                                         for r in want["logs"])
        rows = con.execute(
            f"SELECT service_name, count(*) FROM read_parquet('{args.lake}/logs/**/*.parquet', "
            f"hive_partitioning=true) WHERE tenant = ? GROUP BY 1", [args.tenant]).fetchall()
        got = collections.Counter({k: v for k, v in rows})
        same = got == by_service
        print(f"duckdb: logs per service_name {'match' if same else 'DIFFER'} ({len(got)} services)")
        ok &= same
    print("crosscheck:", "OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
