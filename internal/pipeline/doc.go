// Package pipeline turns a config.Config into the running graph of
// `sluice run`: OTLP receivers → durable queue → lake writer → catalog,
// plus the admin server (/metrics, /healthz, /readyz).
//
// Start order is downstream first (catalog and orphan sweep, queue, lake
// loop), receivers last; Shutdown is the reverse, so upstream drains before
// downstream stops, as in the OpenTelemetry Collector.
//
// # Data path
//
// The Consumer (receiver side) decodes each request into a pooled batch to
// validate and count it, then appends ONE queue record (record.go): a
// header (version 2, signal kind, body encoding, tenant, destination list)
// and the body, OTLP protobuf unless the encoding says otherwise (a
// remote-write request no rule changed is queued as received: prwrecord.go). An empty
// destination list means every consumer of the signal; a listed record is
// read only by the lake ("lake") and the exporters it names, the others
// skip it. It returns after Append, which returns after the fsync: the
// client's 2xx is the acknowledgement that the data is durable.
//
// The lake loop (one goroutine) reads the queue from the position the
// catalog has committed, decodes each record and hands it to the lake
// writer. At each checkpoint (flush_interval, buffered or queue-bytes
// thresholds, shutdown) it flushes the writer, then commits every file the
// writer produced since the last checkpoint together with the queue position
// after the last record it handed over, in ONE catalog transaction, and only
// then releases the queue below that position. docs/design/run.md explains
// why this is exactly-once.
//
// # The I/O tracer source
//
// With receivers.iotrace on, iotrace.go opens the eBPF tracer after the
// receivers and stops it first: each batch it reads from the kernel ring
// becomes one queue record of kind io_events (body: tracer.AppendWire),
// appended like a request, and the lake loop writes it with a
// lake.IOWriter whose files join the same pending list and checkpoint
// transaction as the writer's. Exporters never forward io_events; the
// unflushed tail does not serve them.
//
// With receivers.iotrace.metrics on, iometrics.go also adds every batch to
// bounded cumulative counts per (comm, syscall, path_prefix) and queues
// them every interval, and once at stop, as an OTLP metrics record of the
// iotrace tenant (consumer.appendEmitted, like the rules' emitter), so
// they reach the metrics table and PromQL as sluice_io_*.
//
// # Exporters
//
// exporters.go starts one exporter.Runner per entry of the config's
// exporters: section, each on a queue cursor of its own, after the lake
// loop and before the receivers, and stops them after the lake loop and
// before the queue closes. The lake loop never waits for them; the queue
// keeps a segment until the lake and every cursor passed it (queue
// invariant 10). docs/design/exporters.md explains the at-least-once
// delivery.
//
// # Forward only
//
// When no pipeline lists the lake (config.LakeEnabled), Start opens no
// catalog, lake store, lake loop, tail, upkeep or query API: the queue is
// locked by <queue dir>/_run.lock, released up to queue.MaxPosition once
// so that only the exporters' cursors hold segments, and query.addr (when
// set) serves remote write alone. The consumer refuses signals no
// pipeline takes (consumer.refuse) instead of queueing them for no one.
//
// # The unflushed tail
//
// With the query API on, queries also read the records above the
// committed position (tail.go): the tail reads them from the queue on its
// own reader when a query asks, encodes them with a lake.Writer into
// in-memory Parquet files, and lists them beside the catalog's segments
// such that no row is in both and none is in neither (the catalog position
// read before and after the listing must agree). The lake loop trims the
// tail after each commit, before releasing the queue.
// docs/design/freshness.md explains it.
//
// # Invariants
//
//  1. A request is acknowledged only after its record is fsynced in the queue.
//  2. The writer's commit callback never touches the catalog: files it
//     reports are pending until the checkpoint transaction, which names the
//     queue position covering exactly the records in them (and in all earlier
//     committed files). So the catalog never lists a file whose records the
//     queue could replay, nor a position whose records are in no file.
//  3. Queue space is released only up to the committed position.
//  4. After any failed flush or commit whose outcome is known to be "not
//     committed", the loop deletes its pending files, discards the writer's
//     buffers and rewinds its reader to the committed position. When the
//     outcome is unknown it asks the catalog until it knows.
//  5. At start-up, *.parquet files in the lake layout that the catalog does
//     not know are output of a checkpoint that never committed: their records
//     are still in the queue above the committed position and are replayed,
//     so the files are deleted (moved to _orphans/ in the lake when the
//     catalog has never been committed to, which is also what a wrong
//     catalog.dsn looks like). The sweep lists and deletes through the
//     lake.Store, so it covers an S3 lake too. It runs before the writer
//     exists, under the lake lock (a local flock on <root>/_run.lock, which
//     does not stop a second process on another machine sharing a bucket).
//  6. One `sluice run` per lake root: an exclusive flock on <root>/_run.lock.
//
// # Concurrency
//
// Consume runs on many receiver goroutines at once; it shares only the
// queue (safe for concurrent use), a sync.Pool and metric series. The lake
// writer, queue reader and pending list belong to the lake loop goroutine
// alone; other goroutines reach it only through stop and checkpoint
// requests under a mutex. Start and Shutdown are called by one goroutine;
// Shutdown is idempotent.
package pipeline
