package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// Intent records that the holder of a lease is about to create a lake
// file it has not catalogued yet: an output of compaction or of a rollup.
// The file appears under its final name before the catalog swap that lists
// it, so a run killed in between would leave a file no catalog row names
// and that a glob over the lake still reads. The intent names it: the next
// holder of the lease deletes it (ClaimIntents, then the file, then
// DeleteIntents), and ReplaceIntents turns it into a segment.
type Intent struct {
	Path     string // lake path, in the layout of Segment.Path
	LeaseKey string // the lease its writer held
	Owner    string // its writer, or whoever claimed it since
	Created  time.Time
	// Table and Tenant come from Path.
	Table, Tenant string
}

// AddIntent records that owner, holding the lease key, is about to create
// the file path. It fails with ErrLeaseNotHeld unless owner holds the lease
// (taken, and not taken by another owner nor released since), and with
// ErrDuplicatePath if path already has an intent. Record it before creating the file: a file with no intent and no
// segment row is an orphan nothing cleans up but the pipeline's start-up
// sweep.
func (c *Catalog) AddIntent(ctx context.Context, key, owner, path string) error {
	if _, err := parsePath(path); err != nil {
		return fmt.Errorf("catalog: intent: %w: %w", ErrInvalidSegment, err)
	}
	now := c.now()
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		if err := c.leaseHeld(ctx, tx, key, owner); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, c.d.rebind(`INSERT INTO intents (path, lease_key, owner, created_ns) VALUES (?, ?, ?, ?)`),
			path, key, owner, now.UnixNano())
		if err != nil && c.d.isUnique(err) {
			return fmt.Errorf("%w: %w", ErrDuplicatePath, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: intent to write %q under %q: %w", path, key, err)
	}
	return nil
}

// Intents lists every intent, ordered by lease key and path.
func (c *Catalog) Intents(ctx context.Context) ([]Intent, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT path, lease_key, owner, created_ns FROM intents ORDER BY lease_key, path`)
	if err != nil {
		return nil, fmt.Errorf("catalog: list intents: %w", err)
	}
	out, err := scanIntents(rows)
	if err != nil {
		return nil, fmt.Errorf("catalog: list intents: %w", err)
	}
	return out, nil
}

func scanIntents(rows *sql.Rows) ([]Intent, error) {
	defer rows.Close()
	var out []Intent
	for rows.Next() {
		var in Intent
		var created int64
		if err := rows.Scan(&in.Path, &in.LeaseKey, &in.Owner, &created); err != nil {
			return nil, fmt.Errorf("scan intent: %w", err)
		}
		in.Created = time.Unix(0, created).UTC()
		if p, err := parsePath(in.Path); err == nil {
			in.Table, in.Tenant = p.table, p.tenant
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// ClaimIntents makes owner, which must hold the lease key, the owner of
// every intent under key that another owner recorded, and returns them as
// they were. Their writer lost the lease (owner holds it now), so its
// files are stale: the caller deletes them, then calls DeleteIntents. From
// the claim on, their writer's ReplaceIntents fails with ErrNoIntent, so it
// can never catalogue a file being deleted, however late it wakes up. It
// fails with ErrLeaseNotHeld unless owner holds key.
func (c *Catalog) ClaimIntents(ctx context.Context, key, owner string) ([]Intent, error) {
	var out []Intent
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		out = nil // inTx may run this again
		if err := c.leaseHeld(ctx, tx, key, owner); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, c.d.rebind(`SELECT path, lease_key, owner, created_ns FROM intents
			WHERE lease_key = ? AND owner <> ? ORDER BY path`), key, owner)
		if err != nil {
			return err
		}
		if out, err = scanIntents(rows); err != nil || len(out) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, c.d.rebind(`UPDATE intents SET owner = ? WHERE lease_key = ? AND owner <> ?`), owner, key, owner)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: claim intents under %q: %w", key, err)
	}
	return out, nil
}

// DeleteIntents forgets owner's intents of paths, once their files are
// gone (or catalogued). Intents of other owners are left alone; it returns
// the number deleted.
func (c *Catalog) DeleteIntents(ctx context.Context, owner string, paths []string) (int, error) {
	var n int
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		n = 0
		del, err := tx.PrepareContext(ctx, c.d.rebind(`DELETE FROM intents WHERE path = ? AND owner = ?`))
		if err != nil {
			return err
		}
		defer del.Close()
		for _, p := range paths {
			res, err := del.ExecContext(ctx, p, owner)
			if err != nil {
				return fmt.Errorf("delete intent %q: %w", p, err)
			}
			k, _ := res.RowsAffected()
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: delete %d intents of %q: %w", len(paths), owner, err)
	}
	return n, nil
}

// ReplaceIntents is Replace for the files an upkeep run wrote under the
// lease key: in the same transaction it checks that owner still holds the
// lease (ErrLeaseNotHeld) and deletes owner's intent of every segment in
// add (ErrNoIntent if one is missing: it was claimed). The files of add
// are at their StagingPath (lake.IntentStore wrote them there); the swap
// journals their moves into place along with the replaced files' moves
// out (Move). On any error nothing changes.
func (c *Catalog) ReplaceIntents(ctx context.Context, key, owner string, remove []int64, add []Segment) error {
	if key == "" || owner == "" {
		return fmt.Errorf("catalog: replace under lease %q of %q: want a key and an owner", key, owner)
	}
	return c.replace(ctx, remove, add, func(tx *sql.Tx) error {
		if err := c.leaseHeld(ctx, tx, key, owner); err != nil {
			return err
		}
		if len(add) == 0 {
			return nil
		}
		del, err := tx.PrepareContext(ctx, c.d.rebind(`DELETE FROM intents WHERE path = ? AND owner = ?`))
		if err != nil {
			return fmt.Errorf("prepare delete intents: %w", err)
		}
		defer del.Close()
		ps := make([]string, len(add))
		for i := range add {
			ps[i] = add[i].Path
		}
		slices.Sort(ps) // one lock order for concurrent transactions
		for _, p := range ps {
			res, err := del.ExecContext(ctx, p, owner)
			if err != nil {
				return fmt.Errorf("delete intent %q: %w", p, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("delete intent %q: %w", p, err)
			} else if n != 1 {
				return fmt.Errorf("segment %q: %w", p, ErrNoIntent)
			}
		}
		return nil
	}, true)
}

// intentPaths returns the paths of all intents, for Rebuild.
func intentPaths(ctx context.Context, tx *sql.Tx) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT path FROM intents`)
	if err != nil {
		return nil, fmt.Errorf("read intents: %w", err)
	}
	defer rows.Close()
	m := map[string]bool{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("read intents: %w", err)
		}
		m[p] = true
	}
	return m, rows.Err()
}
