"""Compare pairs of Parquet files (typed encoder, parquet-go oracle) as
pyarrow and DuckDB read them: same schema, same rows in the same order.

usage: oracle_compare.py TYPED ORACLE [TYPED ORACLE ...]
"""
import math
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq


def norm(v):
    """Make values comparable: NaN equals NaN, containers recursively."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(norm(x) for x in v)
    return v


def pylist(col):
    """A column's values; timestamps as int64 nanoseconds (datetime has no ns)."""
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    return col.to_pylist()


def main(args):
    if len(args) % 2 or not args:
        sys.exit("want pairs of files")
    con = duckdb.connect()
    rows = 0
    for typed, oracle in zip(args[0::2], args[1::2]):
        a, b = pq.read_table(typed), pq.read_table(oracle)
        if a.schema != b.schema:
            sys.exit(f"{typed}: pyarrow schema\n{a.schema}\nwant\n{b.schema}")
        if a.num_rows != b.num_rows:
            sys.exit(f"{typed}: pyarrow reads {a.num_rows} rows, want {b.num_rows}")
        for name in a.column_names:
            if a.column(name).equals(b.column(name)):
                continue
            # Arrow's equality fails on NaN: compare the values.
            x, y = norm(pylist(a.column(name))), norm(pylist(b.column(name)))
            if x != y:
                i = next(i for i in range(len(x)) if x[i] != y[i])
                sys.exit(f"{typed}: pyarrow column {name} row {i}: {x[i]!r}, want {y[i]!r}")
        da = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [typed]).fetchall()
        db = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [oracle]).fetchall()
        if da != db:
            sys.exit(f"{typed}: duckdb schema {da}, want {db}")
        # DuckDB: the same rows (EXCEPT ALL both ways; NaN equals NaN there).
        for x, y in ((typed, oracle), (oracle, typed)):
            n = con.execute("SELECT count(*) FROM (SELECT * FROM read_parquet(?) EXCEPT ALL SELECT * FROM read_parquet(?))", [x, y]).fetchone()[0]
            if n:
                sys.exit(f"{typed}: duckdb finds {n} rows of {x} not in {y}")
        na = con.execute("SELECT count(*) FROM read_parquet(?)", [typed]).fetchone()[0]
        if na != b.num_rows:
            sys.exit(f"{typed}: duckdb reads {na} rows, want {b.num_rows}")
        rows += a.num_rows
    print(f"{len(args) // 2} file pairs, {rows} rows: pyarrow and duckdb read the same")


if __name__ == "__main__":
    main(sys.argv[1:])
