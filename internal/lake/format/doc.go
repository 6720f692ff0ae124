// Package format owns the lake's file format (docs/schema.md is its
// contract): the tables and their fixed columns, the names of every column
// and footer key, the attribute-name codec, the bounded-schema rule that
// sends attributes past a file's column cap to overflow columns, Open, the
// one way sluice opens a lake Parquet file, and File, the typed reader of
// lake files into signal batches (reader.go; package lake opens Files from
// its stores).
//
// Files by feature: tables.go (descriptors, column and footer names, kinds),
// names.go (attribute-name codec, overflow columns, KeptColumns), open.go
// (Open, Recover), pages.go (CheckChunk, Pages: the bounds every page is
// held to before parquet-go decodes it), rawpages.go (ReadRawChunk: a
// checked chunk's bytes and page spans, for copying pages verbatim),
// decode.go with deltalen.go and defruns.go (the typed page decoder: a
// checked chunk's pages of the lake's own encodings straight into typed
// slices, DELTA_LENGTH_BYTE_ARRAY values where they lie in the page,
// definition levels of attribute columns as runs), reader.go with readtyped.go,
// attrruns.go, index.go and nested.go (File: projected, typed column
// reads, one row group at a time, from decode.go's pages, or parquet-go's
// for other chunks; attribute sets kept as runs; OTLP JSON of nested
// values back to protobuf), columns.go with columns_hist.go and
// rangetyped.go (the column readers of PromQL and search: rows [a, b) of
// a chunk through decode.go, parquet-go's pages for other chunks),
// json.go (the OTLP JSON of scalar values).
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
//  5. No page reaches parquet-go's decoder or the typed decoder unchecked
//     (pages.go): the typed decoder checks each page as it decodes it,
//     with the same bounds and against the chunk's footer
//     (FuzzDecodePages: it refuses whatever CheckChunk refuses); File
//     checks the chunks it hands to parquet-go before decoding them, the
//     column readers read through Pages/PagesRange, compaction reads
//     through ReadRawChunk, which also checks each page's CRC (a page
//     copied verbatim is never decoded). The typed decoder bounds every
//     step by the page's own sizes (FuzzDecodePages runs it on damaged
//     pages without the footer checks too). A page
//     must fit its chunk, claim at most MaxPageBytes and MaxPageValues
//     (and no more values than its row group has rows, for a flat column),
//     decompress to exactly its uncompressed size (zstd frames are walked
//     before decoding: a frame's declared size is allocated up front), and
//     its level and dictionary-index runs and delta headers hold no more
//     values than it does: parquet-go allocates what each of these claims,
//     and a damaged 6 KB file took it past 6 GB.
//  6. Lossless: File.ReadLogs/ReadMetrics/ReadSpans give back every field of
//     every record the lake writer took, attributes with their original keys
//     and value types, from a column or an overflow column alike.
//
// Concurrency: the descriptors and functions are immutable or pure (the
// Table descriptors must not be modified). A File is used by one goroutine
// at a time; distinct Files may be read concurrently.
package format
