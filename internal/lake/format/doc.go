// Package format owns the lake's file format (docs/schema.md is its
// contract): the tables and their fixed columns, the names of every column
// and footer key, the attribute-name codec, the bounded-schema rule that
// sends attributes past a file's column cap to overflow columns, and Open,
// the one way sluice opens a lake Parquet file.
//
// No other package spells a column name, parses an attribute column name or
// calls parquet.OpenFile on a lake file: they import the constants, the
// Table descriptors (Logs, Metrics, Traces, Rollup, IOEvents), ParseAttrName
// and Open from here, so a change to the format is a change to this package
// and its tests. The writers (package lake's encoder, compaction, rollups)
// build their schemas from the descriptors; the readers (package lake's
// File, compaction, rollups, PromQL, search, catalog rebuild) look their
// columns up by these names.
//
// Invariants:
//
//  1. Attribute column names are injective: prefix ("resource.", "scope.",
//     "attr.") + key with '%' → "%25", then '#' → "%23" + type suffix (""
//     for string, "#int", "#double", "#bool", "#bytes", "#array", "#map",
//     "#empty"). ParseAttrName(AttrName(s, k, t)) = (s, k, t) for every
//     key, and a name ParseAttrName accepts is the AttrName of what it
//     returns (FuzzAttrName).
//  2. Fixed, overflow and attribute column names never collide: fixed and
//     overflow names contain no '.', attribute names start with a prefix
//     that ends in one.
//  3. A file has at most its cap of attribute columns; KeptColumns picks
//     them (most used, then first seen) and the rest of a row's attributes
//     go, typed as OTLP JSON AnyValues, to its scope's overflow column. A
//     key of a row is in its column or in the overflow, never both.
//  4. Open never panics: parquet-go panics on some damaged files, and Open
//     and readers guarded by Recover return an error wrapping ErrCorrupt
//     that names the file instead (FuzzOpen).
//
// Concurrency: everything here is immutable or a pure function; the Table
// descriptors must not be modified.
package format
