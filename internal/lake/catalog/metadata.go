package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// FamilyMetadata is a metric family's type, help and unit as a
// remote-write sender last sent them on their own (Prometheus sends its
// targets' metadata apart from their series). Rows sent with their
// metadata in the same request carry it in the lake itself
// (metric_metadata); this table is for the rest.
type FamilyMetadata struct {
	Name, Type, Help, Unit string
	Updated                time.Time
}

// PutFamilyMetadata stores ms for tenant in one transaction: an entry
// replaces what its family had. A tenant keeps at most maxFamilies
// families (0: no limit); entries of new families beyond that are not
// stored, and refused counts them. Entries identical to what is stored
// are written anyway (their Updated time moves), so callers that see the
// same metadata every minute should skip those themselves.
func (c *Catalog) PutFamilyMetadata(ctx context.Context, tenant string, ms []FamilyMetadata, maxFamilies int) (refused int, err error) {
	if len(ms) == 0 {
		return 0, nil
	}
	update := c.d.rebind(`UPDATE metric_metadata SET type = ?, help = ?, unit = ?, updated_ns = ? WHERE tenant = ? AND name = ?`)
	insert := c.d.rebind(`INSERT INTO metric_metadata (tenant, name, type, help, unit, updated_ns) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, name) DO UPDATE SET type = excluded.type, help = excluded.help, unit = excluded.unit, updated_ns = excluded.updated_ns`)
	err = c.inTx(ctx, func(tx *sql.Tx) error {
		refused = 0
		var n int
		if err := tx.QueryRowContext(ctx, c.d.rebind(`SELECT COUNT(*) FROM metric_metadata WHERE tenant = ?`), tenant).Scan(&n); err != nil {
			return err
		}
		for _, m := range ms {
			ns := m.Updated.UnixNano()
			res, err := tx.ExecContext(ctx, update, m.Type, m.Help, m.Unit, ns, tenant, m.Name)
			if err != nil {
				return err
			}
			if k, err := res.RowsAffected(); err != nil || k > 0 {
				if err != nil {
					return err
				}
				continue
			}
			if maxFamilies > 0 && n >= maxFamilies {
				refused++
				continue
			}
			if _, err := tx.ExecContext(ctx, insert, tenant, m.Name, m.Type, m.Help, m.Unit, ns); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: store metric metadata of tenant %q: %w", tenant, err)
	}
	return refused, nil
}

// ListFamilyMetadata returns the stored metadata of tenant's families by
// name: every family, or only name when it is not "".
func (c *Catalog) ListFamilyMetadata(ctx context.Context, tenant, name string) ([]FamilyMetadata, error) {
	q := `SELECT name, type, help, unit, updated_ns FROM metric_metadata WHERE tenant = ?`
	args := []any{tenant}
	if name != "" {
		q += ` AND name = ?`
		args = append(args, name)
	}
	rows, err := c.db.QueryContext(ctx, c.d.rebind(q+` ORDER BY name`), args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: metric metadata of tenant %q: %w", tenant, err)
	}
	defer rows.Close()
	var out []FamilyMetadata
	for rows.Next() {
		var m FamilyMetadata
		var ns int64
		if err := rows.Scan(&m.Name, &m.Type, &m.Help, &m.Unit, &ns); err != nil {
			return nil, fmt.Errorf("catalog: metric metadata of tenant %q: %w", tenant, err)
		}
		m.Updated = time.Unix(0, ns)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: metric metadata of tenant %q: %w", tenant, err)
	}
	return out, nil
}
