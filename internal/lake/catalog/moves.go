package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Directories of the lake root that hold files outside the Hive tree.
// Their names start with "_", which Hive-style readers (DuckDB, pyarrow,
// Spark, Trino) skip, so a glob over <root>/<table>/** or <root>/** never
// reads them.
const (
	// StagingDir holds the outputs of upkeep runs (compaction, rollups)
	// until their swap: StagingPath(p) for a file catalogued at p.
	StagingDir = "_staging"
	// TrashDir holds replaced files from their swap until the sweeper
	// deletes them after its grace period: TrashPath(p).
	TrashDir = "_trash"
)

// StagingPath is where an upkeep run writes the file it will catalogue at
// p, before its swap.
func StagingPath(p string) string { return StagingDir + "/" + p }

// TrashPath is where the file of the segment at p goes once replaced.
func TrashPath(p string) string { return TrashDir + "/" + p }

// Locations lists, in the order a file passes through them, where the
// file of the segment at p can be: staged, in place, in the trash. A
// reader that misses it at p tries them in this order; since a file only
// moves forward, it finds the file unless the sweeper deleted it.
func Locations(p string) [3]string { return [3]string{StagingPath(p), p, TrashPath(p)} }

// IsOutsideTree reports whether the lake path p is under StagingDir or
// TrashDir.
func IsOutsideTree(p string) bool {
	return strings.HasPrefix(p, StagingDir+"/") || strings.HasPrefix(p, TrashDir+"/")
}

// Move is a file relocation that a swap (Replace, ReplaceIntents)
// committed along with its catalog change: a new file from its staging
// path into place, or a replaced one from its place into the trash. The
// swapping run does the moves right after the commit (lake.ApplyMoves)
// and then deletes them; whatever a crash leaves pending, the sweeper does.
type Move struct {
	ID       int64
	Src, Dst string
	Created  time.Time
}

// recordMoves journals moves (src, dst) inside tx, in order.
func (c *Catalog) recordMoves(ctx context.Context, tx *sql.Tx, moves [][2]string, now time.Time) error {
	if len(moves) == 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, c.d.rebind(`INSERT INTO moves (src, dst, created_ns) VALUES (?, ?, ?)`))
	if err != nil {
		return fmt.Errorf("prepare record moves: %w", err)
	}
	defer ins.Close()
	for _, m := range moves {
		if _, err := ins.ExecContext(ctx, m[0], m[1], now.UnixNano()); err != nil {
			return fmt.Errorf("record move %q -> %q: %w", m[0], m[1], err)
		}
	}
	return nil
}

// Moves lists the pending moves in the order they were committed.
func (c *Catalog) Moves(ctx context.Context) ([]Move, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT id, src, dst, created_ns FROM moves ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("catalog: list moves: %w", err)
	}
	defer rows.Close()
	var out []Move
	for rows.Next() {
		var m Move
		var created int64
		if err := rows.Scan(&m.ID, &m.Src, &m.Dst, &created); err != nil {
			return nil, fmt.Errorf("catalog: list moves: %w", err)
		}
		m.Created = time.Unix(0, created).UTC()
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: list moves: %w", err)
	}
	return out, nil
}

// DeleteMoves forgets moves once done; it returns the number deleted
// (another process may have done and deleted some already).
func (c *Catalog) DeleteMoves(ctx context.Context, ids []int64) (int, error) {
	var n int
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		n = 0
		del, err := tx.PrepareContext(ctx, c.d.rebind(`DELETE FROM moves WHERE id = ?`))
		if err != nil {
			return err
		}
		defer del.Close()
		for _, id := range ids {
			res, err := del.ExecContext(ctx, id)
			if err != nil {
				return fmt.Errorf("delete move %d: %w", id, err)
			}
			k, _ := res.RowsAffected()
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: delete %d moves: %w", len(ids), err)
	}
	return n, nil
}
