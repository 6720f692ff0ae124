package sqlq

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
	"github.com/sluice-dev/sluice/internal/tenant"
)

// Options configure a session.
type Options struct {
	// Root is the local lake directory; catalog paths are relative to it.
	Root   string
	Tenant string
	// From and To (unix ns, 0 = open) prune the files to segments
	// overlapping [From, To]. Rows of those files outside the range stay
	// visible: filter on the time columns for exact bounds.
	From, To int64
	// MemoryLimit is DuckDB's memory_limit, e.g. "2GB"; "" keeps DuckDB's
	// default (80% of RAM).
	MemoryLimit string
	// Threads is DuckDB's thread count; 0 keeps its default (all cores).
	Threads int
	// TempDir is where the session's private directory (spilled data,
	// fetched files) is made; "" means os.TempDir().
	TempDir string
	// Store, when set, holds the lake's files (an S3 lake): the selected
	// files are copied into the private directory before the views are
	// made, since DuckDB itself could read S3 only with its httpfs
	// extension, which is not linked in and never downloaded.
	Store lake.Store
	// MaxFetchBytes bounds what a Store session copies; 0 means
	// DefaultMaxFetchBytes.
	MaxFetchBytes int64
}

// DefaultMaxFetchBytes is the default bound on the files a session copies
// from a Store.
const DefaultMaxFetchBytes = 1 << 30

// ErrMissingFile reports a catalog segment whose file is not under the
// local lake root, which is what an S3 lake looks like from here.
var ErrMissingFile = errors.New("segment file missing")

// ErrInvalidOption reports an Options value DuckDB refused.
var ErrInvalidOption = errors.New("invalid option")

// ErrFetchTooLarge reports a Store session whose files exceed
// Options.MaxFetchBytes.
var ErrFetchTooLarge = errors.New("too much to fetch")

// Engine is one read-only DuckDB session over one tenant's files.
type Engine struct {
	db    *sql.DB
	conn  *sql.Conn
	dir   string // private: spill/ and fetched files
	files map[string]int
}

// Open lists the tenant's live segments and prepares the session: views,
// limits, then the sandbox (doc.go, invariant 1).
func Open(ctx context.Context, cat *catalog.Catalog, opts Options) (*Engine, error) {
	if !tenant.Valid(opts.Tenant) {
		return nil, fmt.Errorf("sql: invalid tenant %q", opts.Tenant)
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("sql: lake root %q: %w", opts.Root, err)
	}
	// DuckDB expands glob characters in file names and has no escape.
	if strings.ContainsAny(root, "*?[{") {
		return nil, fmt.Errorf("sql: lake root %q: contains a glob character (* ? [ {), which DuckDB would expand", root)
	}
	segs := make(map[string][]catalog.Segment, len(Tables))
	var fetchBytes int64
	for _, table := range Tables {
		list, err := cat.List(ctx, catalog.Filter{Table: table, Tenant: opts.Tenant, From: opts.From, To: opts.To})
		if err != nil {
			return nil, fmt.Errorf("sql: list %s segments of tenant %q: %w", table, opts.Tenant, err)
		}
		segs[table] = list
		for _, s := range list {
			fetchBytes += s.Bytes
		}
	}
	maxFetch := opts.MaxFetchBytes
	if maxFetch <= 0 {
		maxFetch = DefaultMaxFetchBytes
	}
	if opts.Store != nil && fetchBytes > maxFetch {
		return nil, fmt.Errorf("sql: %w: the selected files hold %d bytes, over the limit of %d; "+
			"narrow the time range or raise the limit", ErrFetchTooLarge, fetchBytes, maxFetch)
	}

	tmpParent := opts.TempDir
	if tmpParent == "" {
		tmpParent = os.TempDir()
	}
	dir, err := os.MkdirTemp(tmpParent, "sluice-sql-")
	if err != nil {
		return nil, fmt.Errorf("sql: private directory: %w", err)
	}
	e := &Engine{dir: dir, files: make(map[string]int, len(Tables))}
	if strings.ContainsAny(dir, "*?[{") {
		e.Close()
		return nil, fmt.Errorf("sql: temporary directory %q: contains a glob character (* ? [ {), which DuckDB would expand", dir)
	}
	views := make(map[string][]string, len(Tables))
	var all []string
	var buf []byte // fetch's copy buffer
	for _, table := range Tables {
		files := make([]string, 0, len(segs[table]))
		for _, s := range segs[table] {
			var p string
			if opts.Store != nil {
				p, err = fetch(opts.Store, s.Path, filepath.Join(dir, "lake"), &buf)
			} else {
				p, err = localFile(root, s.Path, filepath.Join(dir, "lake"))
			}
			if err != nil {
				e.Close()
				return nil, err
			}
			files = append(files, p)
		}
		views[table] = files
		all = append(all, files...)
	}

	if e.db, err = sql.Open("duckdb", ""); err != nil {
		e.Close()
		return nil, fmt.Errorf("sql: open duckdb: %w", err)
	}
	// One connection: the settings below are per database, and a single
	// connection keeps every query on the session that was prepared.
	e.db.SetMaxOpenConns(1)
	if e.conn, err = e.db.Conn(ctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("sql: duckdb connection: %w", err)
	}
	spill := filepath.Join(dir, "spill")
	setup := []string{
		"SET autoinstall_known_extensions = false",
		"SET autoload_known_extensions = false",
		"SET temp_directory = " + quoteString(spill),
		// Times in the lake are UTC; date_trunc, casts to VARCHAR and
		// TIMESTAMPTZ arithmetic would otherwise follow the host's zone.
		"SET TimeZone = 'UTC'",
	}
	if opts.MemoryLimit != "" {
		if _, err := e.conn.ExecContext(ctx, "SET memory_limit = "+quoteString(opts.MemoryLimit)); err != nil {
			e.Close()
			return nil, fmt.Errorf("sql: %w: memory limit %q: %w", ErrInvalidOption, opts.MemoryLimit, err)
		}
	}
	if opts.Threads > 0 {
		setup = append(setup, "SET threads = "+strconv.Itoa(opts.Threads))
	}
	for _, table := range Tables {
		setup = append(setup, viewSQL(table, views[table]))
		e.files[table] = len(views[table])
	}
	var allowed strings.Builder
	allowed.WriteString("SET allowed_paths = ")
	writeList(&allowed, all)
	setup = append(setup,
		allowed.String(),
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	)
	for _, stmt := range setup {
		if _, err := e.conn.ExecContext(ctx, stmt); err != nil {
			e.Close()
			return nil, fmt.Errorf("sql: prepare session (%.60s): %w", stmt, err)
		}
	}
	return e, nil
}

// Files returns how many files the view of table reads.
func (e *Engine) Files(table string) int { return e.files[table] }

// localFile returns a path of the file of the segment rel of the local
// lake at root for the session's views: a hard link in dir, kept in the
// Hive layout, so that the session reads the files it listed even after a
// swap moves them out of the Hive tree or the sweeper deletes them. Where
// dir is on another filesystem, it is the file's path where it is now
// (lake.OpenSegment's order), which a later move breaks.
func localFile(root, rel, dir string) (string, error) {
	dst := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", fmt.Errorf("sql: link %s: %w", rel, err)
	}
	locs := catalog.Locations(rel)
	for _, loc := range append([]string{rel}, locs[:]...) {
		src := filepath.Join(root, filepath.FromSlash(loc))
		err := os.Link(src, dst)
		if err == nil {
			return dst, nil
		}
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		// Another filesystem, or links not allowed: use the file itself.
		if _, serr := os.Stat(src); serr == nil {
			return src, nil
		} else if !errors.Is(serr, os.ErrNotExist) {
			return "", fmt.Errorf("sql: segment %s: %w", rel, serr)
		}
	}
	return "", fmt.Errorf("sql: %w: the catalog lists %s but it is not under %s; "+
		"if the lake's files are in S3, name the bucket (sluice sql --s3-bucket ...): "+
		"DuckDB cannot read S3 here, as its httpfs extension is not linked in and is never downloaded",
		ErrMissingFile, rel, root)
}

// fetch copies the object rel of st to dir/rel and returns that path. The
// Hive layout is kept, so the partition columns still come from the path.
// *buf is the copy buffer, made on first use: large, so that each read is
// one ranged GET.
func fetch(st lake.Store, rel, dir string, buf *[]byte) (string, error) {
	if *buf == nil {
		*buf = make([]byte, 8<<20)
	}
	dst := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", fmt.Errorf("sql: fetch %s: %w", rel, err)
	}
	src, err := lake.OpenSegment(st, rel)
	if err != nil {
		return "", fmt.Errorf("sql: fetch %s: %w", rel, err)
	}
	defer src.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("sql: fetch %s: %w", rel, err)
	}
	// Hide *os.File's ReadFrom, which would copy in small reads.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, io.NewSectionReader(src, 0, src.Size()), *buf); err != nil {
		f.Close()
		return "", fmt.Errorf("sql: fetch %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("sql: fetch %s: %w", rel, err)
	}
	return dst, nil
}

// Close ends the session and removes its private directory.
func (e *Engine) Close() error {
	var err error
	if e.conn != nil {
		err = e.conn.Close()
	}
	if e.db != nil {
		if cerr := e.db.Close(); err == nil {
			err = cerr
		}
	}
	os.RemoveAll(e.dir)
	return err
}

// Column describes one result column.
type Column struct {
	Name string
	Type string // DuckDB's type name, e.g. BIGINT, TIMESTAMP WITH TIME ZONE, DOUBLE[]
}

// Rows iterates a result of at most maxRows rows.
type Rows struct {
	Columns []Column
	rows    *sql.Rows
	vals    []any
	ptrs    []any
	max, n  int
	cut     bool
	err     error
}

// Query runs one query (or several statements, of which the last one's
// result is returned) and returns at most maxRows rows; maxRows <= 0 means
// no limit. The caller closes the Rows before the next Query. Errors from
// DuckDB are returned as DuckDB words them; when ctx ends the error wraps
// ctx.Err().
func (e *Engine) Query(ctx context.Context, query string, maxRows int) (*Rows, error) {
	q := strings.TrimRightFunc(query, func(r rune) bool { return r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	if strings.TrimSpace(q) == "" {
		return nil, errors.New("sql: empty query")
	}
	var rows *sql.Rows
	var err error
	if maxRows > 0 {
		// The newline before ")" keeps a trailing "-- comment" from
		// swallowing the wrapper.
		rows, err = e.conn.QueryContext(ctx, "SELECT * FROM (\n"+q+"\n) LIMIT "+strconv.Itoa(maxRows+1))
		if err != nil && !isParserError(err) {
			return nil, unwrapErr(ctx, err)
		}
	}
	if rows == nil {
		// Not a query DuckDB accepts as a subquery (PRAGMA, EXPLAIN, SET,
		// several statements): run it as written and cut while reading.
		if rows, err = e.conn.QueryContext(ctx, query); err != nil {
			return nil, wrapCtx(ctx, err)
		}
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		rows.Close()
		return nil, fmt.Errorf("sql: result columns: %w", err)
	}
	r := &Rows{rows: rows, max: maxRows, Columns: make([]Column, len(types))}
	for i, t := range types {
		r.Columns[i] = Column{Name: t.Name(), Type: t.DatabaseTypeName()}
	}
	r.vals = make([]any, len(types))
	r.ptrs = make([]any, len(types))
	for i := range r.vals {
		r.ptrs[i] = &r.vals[i]
	}
	return r, nil
}

// lineRE finds DuckDB's "LINE n:" error context.
var lineRE = regexp.MustCompile(`(?m)^LINE (\d+):`)

// unwrapErr makes an error of the LIMIT-wrapped query read as if the user's
// text had run alone: that text starts on line 2 of the wrapper, columns
// unchanged, so DuckDB's "LINE n" is shifted back by one (padded to keep
// the caret under the right character).
func unwrapErr(ctx context.Context, err error) error {
	var de *duckdb.Error
	if ctx.Err() != nil || !errors.As(err, &de) {
		return wrapCtx(ctx, err)
	}
	msg := lineRE.ReplaceAllStringFunc(de.Msg, func(m string) string {
		n, err := strconv.Atoi(m[len("LINE ") : len(m)-1])
		if err != nil || n < 2 {
			return m
		}
		s := "LINE " + strconv.Itoa(n-1) + ":"
		return s + strings.Repeat(" ", len(m)-len(s))
	})
	return &duckdb.Error{Type: de.Type, Msg: msg}
}

func isParserError(err error) bool {
	var de *duckdb.Error
	return errors.As(err, &de) && de.Type == duckdb.ErrorTypeParser
}

// wrapCtx makes a timeout or cancellation recognisable with errors.Is
// whatever DuckDB said about the interrupt.
func wrapCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// Next advances to the next row; false at the end, at maxRows, or on error.
func (r *Rows) Next() bool {
	if r.err != nil || !r.rows.Next() {
		return false
	}
	if r.max > 0 && r.n == r.max {
		r.cut = true
		return false
	}
	if r.err = r.rows.Scan(r.ptrs...); r.err != nil {
		return false
	}
	r.n++
	return true
}

// Values returns the current row; valid until the next call of Next.
// Values are what the driver gives: nil, bool, intN, uintN, float32/64,
// string, []byte, time.Time, *big.Int, duckdb.Decimal, duckdb.Interval,
// []any (LIST), map[string]any (STRUCT), duckdb.OrderedMap (MAP).
func (r *Rows) Values() []any { return r.vals }

// Truncated reports whether rows beyond maxRows were cut.
func (r *Rows) Truncated() bool { return r.cut }

// Count returns how many rows Next has returned.
func (r *Rows) Count() int { return r.n }

// Err returns the error that ended iteration, if any.
func (r *Rows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.rows.Err()
}

// Close releases the result.
func (r *Rows) Close() error { return r.rows.Close() }
