// Package pqenc writes the column chunks of lake Parquet files column by
// column, and copies runs of rows from decoded column chunks of other lake
// files into them. It is the lake's one writer of Parquet pages: ingest
// (lake.Writer: logs, metrics, traces; lake.IOWriter: io_events),
// compaction and rollups (metrics_rollup) write their files with it.
// parquet-go stays for schemas, footers (Footer), reading, and as the
// oracle the tests compare these files with (lake's TestOracleEncoder).
//
// parquet-go's writer takes one parquet.Value per cell and hashes every
// dictionary value again; here a run of one value costs one level run and
// one dictionary-index run, a run of copied rows one copy of their level
// bytes and values, and a dictionary value is hashed once per input chunk
// it comes from.
//
// # What it writes
//
// What parquet-go writes for the same schema and options: data pages v2
// with CRCs; for dictionary columns a PLAIN dictionary page and
// RLE_DICTIONARY data pages of at most DictPageRows rows, falling back
// to DELTA_LENGTH_BYTE_ARRAY for the whole chunk once the dictionary
// outgrows Leaf.MaxDictBytes (where
// parquet-go's DictionaryMaxBytes falls back for the chunk's later pages
// only); PLAIN or (byte arrays) DELTA_LENGTH_BYTE_ARRAY otherwise; zstd;
// chunk statistics (NaN only when all values are NaN); encoding stats;
// column and offset indexes (byte array bounds cut to
// ColumnIndexSizeLimit bytes, as parquet-go cuts them); split
// block bloom filters where Leaf.Bloom is set. The footer is the caller's,
// usually parquet-go's own for an empty file of the same schema and options
// (Footer). Levels and dictionary indexes are RLE runs only (no
// bit-packed groups), which the hybrid encoding allows, except in pages
// copied or remapped from other files, whose levels are kept as they are.
//
// # Use
//
// A File writes row groups; within one, every leaf column's chunk is built
// by a Column (Reset, then values row by row, or CopyRows and
// CopyRowsPages from a Chunk: the latter copies the input pages a run
// covers whole as they are, pagecopy.go, dictionary-encoded ones where
// the output chunk's dictionary can take their input's, dictcopy.go, and
// remaps the indexes of those whose input dictionary orders its values
// otherwise, dictremap.go; CopyFew copies runs of one or two rows) and
// handed to File.WriteChunk in schema order. Columns buffer their chunk's
// compressed pages, so several of them may be filled side by side and
// written at the end of the row group. Nothing here is safe for concurrent
// use; distinct Files and Columns are independent.
//
// # Invariants
//
//  1. Pages end on row boundaries: a list's values never straddle pages.
//  2. A Column's dictionary index runs and levels of a chunk are held until
//     the chunk is written (the dictionary page must come first); their
//     values are copied, never aliased, so inputs may be released at once.
//  3. Values are little-endian in memory (amd64, arm64), so PLAIN integer
//     and float pages are the values' bytes.
package pqenc
