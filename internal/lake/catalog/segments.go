package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

const (
	kindService = "service"
	kindMetric  = "metric"
)

const segmentColumns = `s.id, s.table_name, s.tenant, s.day, s.hour, s.path, s.min_time, s.max_time,
	s.row_count, s.byte_size, s.level, s.schema_hash, s.created_ns, s.queue_pos, s.replaced_ns`

// AddSegments catalogues segments whose files are already in place, in one
// transaction: all or none.
func (c *Catalog) AddSegments(ctx context.Context, segs ...Segment) error {
	return c.addSegments(ctx, nil, segs)
}

// AddSegmentsWithQueue catalogues segments and commits queue position q in
// one transaction, so a replay after a crash can skip exactly what is in
// the lake. Segments with QueuePos 0 get q.Pos. It fails with
// ErrQueueRegress, adding nothing, unless q.Pos is after the committed
// position.
func (c *Catalog) AddSegmentsWithQueue(ctx context.Context, q QueueCommit, segs ...Segment) error {
	if q.Name == "" || q.Pos <= 0 {
		return fmt.Errorf("catalog: queue commit %q at %d: want a name and a positive position", q.Name, q.Pos)
	}
	return c.addSegments(ctx, &q, segs)
}

func (c *Catalog) addSegments(ctx context.Context, q *QueueCommit, segs []Segment) error {
	for i := range segs {
		if err := segs[i].validate(); err != nil {
			return err
		}
	}
	now := c.now()
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		if err := c.insertSegments(ctx, tx, segs, q, now, false); err != nil {
			return err
		}
		if q != nil {
			return c.commitQueue(ctx, tx, *q)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalog: add %d segments: %w", len(segs), err)
	}
	return nil
}

// insertSegments inserts validated segments inside tx.
// Segment.ReplacedAt is stored only when keepReplaced (Rebuild carrying
// replaced marks over); inserts from writers are always live.
func (c *Catalog) insertSegments(ctx context.Context, tx *sql.Tx, segs []Segment, q *QueueCommit, now time.Time, keepReplaced bool) error {
	if len(segs) == 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, c.d.rebind(`INSERT INTO segments
		(table_name, tenant, day, hour, path, min_time, max_time, row_count, byte_size, level, schema_hash, created_ns, queue_pos, replaced_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`))
	if err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	defer ins.Close()
	var insName *sql.Stmt
	for i := range segs {
		s := &segs[i]
		created := s.Created
		if created.IsZero() {
			created = now
		}
		pos := s.QueuePos
		if pos == 0 && q != nil {
			pos = q.Pos
		}
		var replaced sql.NullInt64
		if keepReplaced && !s.ReplacedAt.IsZero() {
			replaced = sql.NullInt64{Int64: s.ReplacedAt.UnixNano(), Valid: true}
		}
		var id int64
		err := ins.QueryRowContext(ctx, s.Table, s.Tenant, s.Day, s.Hour, s.Path, s.MinTime, s.MaxTime,
			s.Rows, s.Bytes, s.Level, s.SchemaHash, created.UnixNano(), pos, replaced).Scan(&id)
		if err != nil {
			if c.d.isUnique(err) {
				return fmt.Errorf("insert segment %q: %w: %w", s.Path, ErrDuplicatePath, err)
			}
			return fmt.Errorf("insert segment %q: %w", s.Path, err)
		}
		for _, kn := range [...]struct {
			kind  string
			names []string
		}{{kindService, s.Services}, {kindMetric, s.MetricNames}} {
			for _, name := range uniqueSorted(kn.names) {
				if insName == nil {
					if insName, err = tx.PrepareContext(ctx, c.d.rebind(`INSERT INTO segment_names (segment_id, kind, name) VALUES (?, ?, ?)`)); err != nil {
						return fmt.Errorf("prepare insert names: %w", err)
					}
					defer insName.Close()
				}
				if _, err := insName.ExecContext(ctx, id, kn.kind, name); err != nil {
					return fmt.Errorf("insert %s name %q of segment %q: %w", kn.kind, name, s.Path, err)
				}
			}
		}
	}
	return nil
}

func uniqueSorted(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// commitQueue moves queue q forward; the conditional upsert makes the check
// and the write one statement, race-free in every dialect.
func (c *Catalog) commitQueue(ctx context.Context, tx *sql.Tx, q QueueCommit) error {
	res, err := tx.ExecContext(ctx, c.d.rebind(`INSERT INTO queue_positions (name, pos) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET pos = excluded.pos WHERE queue_positions.pos < excluded.pos`), q.Name, q.Pos)
	if err != nil {
		return fmt.Errorf("commit queue %q at %d: %w", q.Name, q.Pos, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("commit queue %q at %d: %w", q.Name, q.Pos, err)
	} else if n != 1 {
		var cur int64
		_ = tx.QueryRowContext(ctx, c.d.rebind(`SELECT pos FROM queue_positions WHERE name = ?`), q.Name).Scan(&cur)
		return fmt.Errorf("commit queue %q at %d (committed %d): %w", q.Name, q.Pos, cur, ErrQueueRegress)
	}
	return nil
}

// QueuePosition returns the committed position of queue name, 0 if none.
func (c *Catalog) QueuePosition(ctx context.Context, name string) (int64, error) {
	var pos int64
	err := c.db.QueryRowContext(ctx, c.d.rebind(`SELECT pos FROM queue_positions WHERE name = ?`), name).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("catalog: queue position %q: %w", name, err)
	}
	return pos, nil
}

// Replace marks the segments remove as replaced and inserts add, in one
// transaction. It fails with ErrStale, changing nothing, if any id in
// remove is unknown or already replaced, so two compactions that picked
// the same input cannot both commit. The replaced rows stay, with their
// replaced time, until DeleteReplaced; their files must outlive any reader
// that listed them before the swap.
func (c *Catalog) Replace(ctx context.Context, remove []int64, add []Segment) error {
	return c.replace(ctx, remove, add, nil, false)
}

// replace is Replace with more checks and writes, run first in its
// transaction when not nil. It journals the moves that take the replaced
// files out of the Hive tree (Move) and, when staged, those that bring
// the added files in from StagingPath.
func (c *Catalog) replace(ctx context.Context, remove []int64, add []Segment, first func(tx *sql.Tx) error, staged bool) error {
	for i := range add {
		if err := add[i].validate(); err != nil {
			return err
		}
	}
	sorted := slices.Clone(remove)
	slices.Sort(sorted)
	now := c.now()
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		if first != nil {
			if err := first(tx); err != nil {
				return err
			}
		}
		upd, err := tx.PrepareContext(ctx, c.d.rebind(`UPDATE segments SET replaced_ns = ? WHERE id = ? AND replaced_ns IS NULL`))
		if err != nil {
			return fmt.Errorf("prepare replace: %w", err)
		}
		defer upd.Close()
		// Ascending ids: two Replaces sharing inputs lock rows in one
		// order, so PostgreSQL makes the later one wait and see ErrStale
		// rather than deadlock.
		for _, id := range sorted {
			res, err := upd.ExecContext(ctx, now.UnixNano(), id)
			if err != nil {
				return fmt.Errorf("mark segment %d replaced: %w", id, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("mark segment %d replaced: %w", id, err)
			} else if n != 1 {
				return fmt.Errorf("segment %d: %w", id, ErrStale)
			}
		}
		if err := c.insertSegments(ctx, tx, add, nil, now, false); err != nil {
			return err
		}
		// The new files come in first, then the old ones leave: a glob
		// between two moves sees rows twice rather than none (docs/query.md).
		var moves [][2]string
		if staged {
			for i := range add {
				moves = append(moves, [2]string{StagingPath(add[i].Path), add[i].Path})
			}
		}
		for _, id := range sorted {
			var p string
			if err := tx.QueryRowContext(ctx, c.d.rebind(`SELECT path FROM segments WHERE id = ?`), id).Scan(&p); err != nil {
				return fmt.Errorf("read path of segment %d: %w", id, err)
			}
			moves = append(moves, [2]string{p, TrashPath(p)})
		}
		return c.recordMoves(ctx, tx, moves, now)
	})
	if err != nil {
		return fmt.Errorf("catalog: replace %d segments with %d: %w", len(remove), len(add), err)
	}
	return nil
}

// DeleteReplaced forgets replaced segments whose files the sweeper has
// deleted. Live segments are never deleted; it returns the number removed.
func (c *Catalog) DeleteReplaced(ctx context.Context, ids []int64) (int, error) {
	var removed int
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		removed = 0 // inTx may run this again
		del, err := tx.PrepareContext(ctx, c.d.rebind(`DELETE FROM segments WHERE id = ? AND replaced_ns IS NOT NULL`))
		if err != nil {
			return fmt.Errorf("prepare delete: %w", err)
		}
		defer del.Close()
		for _, id := range ids {
			res, err := del.ExecContext(ctx, id)
			if err != nil {
				return fmt.Errorf("delete segment %d: %w", id, err)
			}
			n, _ := res.RowsAffected()
			removed += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: delete replaced segments: %w", err)
	}
	return removed, nil
}

// where builds the WHERE clause shared by List's two queries.
func (f *Filter) where() (string, []any) {
	var b strings.Builder
	var args []any
	b.WriteString(" WHERE 1 = 1")
	add := func(cond string, a ...any) {
		b.WriteString(" AND ")
		b.WriteString(cond)
		args = append(args, a...)
	}
	if f.Table != "" {
		add("s.table_name = ?", f.Table)
	}
	if f.Tenant != "" {
		add("s.tenant = ?", f.Tenant)
	}
	if f.From != 0 {
		add("s.max_time >= ?", f.From)
	}
	if f.To != 0 {
		add("s.min_time <= ?", f.To)
	}
	if !f.IncludeReplaced {
		add("s.replaced_ns IS NULL")
	}
	if f.Level != nil {
		add("s.level = ?", *f.Level)
	}
	for _, kn := range [...]struct{ kind, name string }{{kindService, f.Service}, {kindMetric, f.MetricName}} {
		if kn.name == "" {
			continue
		}
		add(`(EXISTS (SELECT 1 FROM segment_names n WHERE n.segment_id = s.id AND n.kind = ? AND n.name = ?)
			OR NOT EXISTS (SELECT 1 FROM segment_names n WHERE n.segment_id = s.id AND n.kind = ?))`,
			kn.kind, kn.name, kn.kind)
	}
	return b.String(), args
}

// List returns the segments matching f, ordered by table, tenant, day,
// hour and path.
func (c *Catalog) List(ctx context.Context, f Filter) ([]Segment, error) {
	where, args := f.where()
	var segs []Segment
	err := c.inReadTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, c.d.rebind(`SELECT `+segmentColumns+` FROM segments s`+where+
			` ORDER BY s.table_name, s.tenant, s.day, s.hour, s.path`), args...)
		if err != nil {
			return fmt.Errorf("query segments: %w", err)
		}
		segs, err = scanSegments(rows)
		if err != nil || len(segs) == 0 {
			return err
		}
		byID := make(map[int64]int, len(segs))
		for i := range segs {
			byID[segs[i].ID] = i
		}
		rows, err = tx.QueryContext(ctx, c.d.rebind(`SELECT n.segment_id, n.kind, n.name
			FROM segment_names n JOIN segments s ON s.id = n.segment_id`+where+
			` ORDER BY n.segment_id, n.kind, n.name`), args...)
		if err != nil {
			return fmt.Errorf("query segment names: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var kind, name string
			if err := rows.Scan(&id, &kind, &name); err != nil {
				return fmt.Errorf("scan segment name: %w", err)
			}
			i, ok := byID[id]
			if !ok {
				continue
			}
			switch kind {
			case kindService:
				segs[i].Services = append(segs[i].Services, name)
			case kindMetric:
				segs[i].MetricNames = append(segs[i].MetricNames, name)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list: %w", err)
	}
	return segs, nil
}

func scanSegments(rows *sql.Rows) ([]Segment, error) {
	defer rows.Close()
	var segs []Segment
	for rows.Next() {
		var s Segment
		var created int64
		var replaced sql.NullInt64
		if err := rows.Scan(&s.ID, &s.Table, &s.Tenant, &s.Day, &s.Hour, &s.Path, &s.MinTime, &s.MaxTime,
			&s.Rows, &s.Bytes, &s.Level, &s.SchemaHash, &created, &s.QueuePos, &replaced); err != nil {
			return nil, fmt.Errorf("scan segment: %w", err)
		}
		s.Created = time.Unix(0, created).UTC()
		if replaced.Valid {
			s.ReplacedAt = time.Unix(0, replaced.Int64).UTC()
		}
		segs = append(segs, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read segments: %w", err)
	}
	return segs, nil
}

// Summary aggregates live segments per table, tenant, day and hour, in
// that order.
func (c *Catalog) Summary(ctx context.Context) ([]PartitionSummary, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT table_name, tenant, day, hour, COUNT(*),
		CAST(SUM(row_count) AS BIGINT), CAST(SUM(byte_size) AS BIGINT), MIN(min_time), MAX(max_time)
		FROM segments WHERE replaced_ns IS NULL
		GROUP BY table_name, tenant, day, hour
		ORDER BY table_name, tenant, day, hour`)
	if err != nil {
		return nil, fmt.Errorf("catalog: summary: %w", err)
	}
	defer rows.Close()
	var out []PartitionSummary
	for rows.Next() {
		var p PartitionSummary
		if err := rows.Scan(&p.Table, &p.Tenant, &p.Day, &p.Hour, &p.Segments, &p.Rows, &p.Bytes, &p.MinTime, &p.MaxTime); err != nil {
			return nil, fmt.Errorf("catalog: summary: scan: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: summary: %w", err)
	}
	return out, nil
}

// IsLive reports whether the catalog lists a live (not replaced) segment
// at path.
func (c *Catalog) IsLive(ctx context.Context, path string) (bool, error) {
	var n int
	err := c.inReadTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, c.d.rebind(`SELECT count(*) FROM segments WHERE path = ? AND replaced_ns IS NULL`), path).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("catalog: look up segment %s: %w", path, err)
	}
	return n > 0, nil
}
