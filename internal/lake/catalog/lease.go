package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// TryLease takes or renews the lease key for owner until now+ttl. It
// returns false, without error, while another owner holds an unexpired
// lease. Owners must be unique per process (e.g. host/pid/random), and work
// done under a lease must finish well within ttl or renew it. Expiry is
// judged by the PostgreSQL server's clock, or, for SQLite, by the clock of
// whoever asks next (one host, so one clock).
func (c *Catalog) TryLease(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if key == "" || owner == "" || ttl <= 0 {
		return false, fmt.Errorf("catalog: lease %q for %q: want a key, an owner and a positive ttl", key, owner)
	}
	// One conditional upsert: insert, renew our own, or take an expired one.
	const upsert = `INSERT INTO leases (lease_key, owner, expires_ns) VALUES (?, ?, %s)
		ON CONFLICT (lease_key) DO UPDATE SET owner = excluded.owner, expires_ns = excluded.expires_ns
		WHERE leases.owner = excluded.owner OR leases.expires_ns <= %s`
	var res sql.Result
	var err error
	if c.leaseNow != "" {
		q := fmt.Sprintf(upsert, c.leaseNow+" + CAST(? AS BIGINT)", c.leaseNow)
		res, err = c.db.ExecContext(ctx, c.d.rebind(q), key, owner, ttl.Nanoseconds())
	} else {
		now := c.now()
		res, err = c.db.ExecContext(ctx, c.d.rebind(fmt.Sprintf(upsert, "?", "?")),
			key, owner, now.Add(ttl).UnixNano(), now.UnixNano())
	}
	if err != nil {
		return false, fmt.Errorf("catalog: lease %q for %q: %w", key, owner, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("catalog: lease %q for %q: %w", key, owner, err)
	}
	return n == 1, nil
}

// ReleaseLease gives up owner's lease on key. It returns ErrLeaseNotHeld if
// owner does not hold it (never taken, released, or expired and taken by
// another owner), which tells the caller its work may have overlapped.
func (c *Catalog) ReleaseLease(ctx context.Context, key, owner string) error {
	res, err := c.db.ExecContext(ctx, c.d.rebind(`DELETE FROM leases WHERE lease_key = ? AND owner = ?`), key, owner)
	if err != nil {
		return fmt.Errorf("catalog: release lease %q for %q: %w", key, owner, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("catalog: release lease %q for %q: %w", key, owner, err)
	} else if n != 1 {
		return fmt.Errorf("catalog: release lease %q for %q: %w", key, owner, ErrLeaseNotHeld)
	}
	return nil
}
