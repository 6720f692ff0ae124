package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

// leaseHeld locks owner's lease on key inside tx, or fails with
// ErrLeaseNotHeld. An expired lease that no other owner has taken since
// still counts (taking it changes the owner, releasing it deletes the
// row), as for TryLease, which would renew it; what another owner did
// under it in between is caught by the intents it claimed and by
// Replace's check of the inputs. The no-op UPDATE takes the row lock on
// PostgreSQL, so a taker of the lease waits for tx instead of slipping in
// between the check and the writes that depend on it; SQLite's write lock
// already serializes them.
func (c *Catalog) leaseHeld(ctx context.Context, tx *sql.Tx, key, owner string) error {
	res, err := tx.ExecContext(ctx, c.d.rebind(`UPDATE leases SET owner = owner WHERE lease_key = ? AND owner = ?`), key, owner)
	if err != nil {
		return fmt.Errorf("check lease %q of %q: %w", key, owner, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("check lease %q of %q: %w", key, owner, err)
	} else if n != 1 {
		return fmt.Errorf("lease %q of %q: %w", key, owner, ErrLeaseNotHeld)
	}
	return nil
}

// Lease is a lease that HoldLease took and keeps renewing in the
// background until Release. Context, Lost and Key may be called from any
// goroutine; Renew and Release by the holder.
type Lease struct {
	c          *Catalog
	key, owner string
	ttl        time.Duration
	log        *slog.Logger
	parent     context.Context
	ctx        context.Context
	cancel     context.CancelCauseFunc
	done       chan struct{}
	release    sync.Once
	releaseErr error

	mu   sync.Mutex
	held time.Time // the lease runs to at least held+ttl
}

// HoldLease takes the lease key for owner (as TryLease) and keeps it: a
// goroutine renews it every ttl/3 until Release. ok is false, with a nil
// Lease and no error, while another owner holds it. If a renewal is
// refused (another owner took the lease), or renewals keep failing until
// the lease is about to expire, the lease is lost: Context is cancelled
// with a cause wrapping ErrLeaseLost, which Lost returns. Failed renewals
// before that are logged to log and retried.
func (c *Catalog) HoldLease(ctx context.Context, key, owner string, ttl time.Duration, log *slog.Logger) (l *Lease, ok bool, err error) {
	start := time.Now()
	if ok, err := c.TryLease(ctx, key, owner, ttl); err != nil || !ok {
		return nil, false, err
	}
	if log == nil {
		log = slog.Default()
	}
	l = &Lease{c: c, key: key, owner: owner, ttl: ttl, log: log, parent: ctx, held: start, done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	go l.keep()
	return l, true, nil
}

// Key returns the lease's key.
func (l *Lease) Key() string { return l.key }

// Context is cancelled when the lease is lost, released, or the context
// given to HoldLease ends. Work that must stop with the lease runs in it.
func (l *Lease) Context() context.Context { return l.ctx }

// Lost returns the error (wrapping ErrLeaseLost) with which the lease was
// lost, or nil while it is held or after a plain Release.
func (l *Lease) Lost() error {
	if cause := context.Cause(l.ctx); errors.Is(cause, ErrLeaseLost) {
		return cause
	}
	return nil
}

// Renew renews the lease now, for a full ttl: call it just before
// committing work done under the lease. It fails with an error wrapping
// ErrLeaseLost if the lease is lost or cannot be renewed.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Lost(); err != nil {
		return err
	}
	start := time.Now()
	ok, err := l.c.TryLease(ctx, l.key, l.owner, l.ttl)
	switch {
	case err != nil:
		return fmt.Errorf("%w: renew %q: %w", ErrLeaseLost, l.key, err)
	case !ok:
		err := fmt.Errorf("%w: %q taken by another owner", ErrLeaseLost, l.key)
		l.cancel(err)
		return err
	}
	l.renewed(start)
	return nil
}

func (l *Lease) renewed(at time.Time) {
	l.mu.Lock()
	if at.After(l.held) {
		l.held = at
	}
	l.mu.Unlock()
}

func (l *Lease) heldSince() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// Release stops the renewals, cancels Context and gives the lease up. It
// returns ErrLeaseNotHeld (wrapped) if the lease was no longer ours, which
// tells that work done under it may have overlapped another owner's. Only
// the first call does anything; later ones return its result.
func (l *Lease) Release() error {
	l.release.Do(func() {
		l.cancel(nil)
		<-l.done
		l.releaseErr = l.c.ReleaseLease(context.WithoutCancel(l.parent), l.key, l.owner)
	})
	return l.releaseErr
}

// keep renews the lease every ttl/3 until ctx ends. A renewal that fails
// with an error is retried at the next tick, as long as the lease is
// surely still ours at that tick; a refused one means it is lost.
func (l *Lease) keep() {
	defer close(l.done)
	every := max(l.ttl/3, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		ok, err := l.c.TryLease(l.ctx, l.key, l.owner, l.ttl)
		switch {
		case ok:
			l.renewed(start)
		case err == nil:
			l.cancel(fmt.Errorf("%w: %q taken by another owner", ErrLeaseLost, l.key))
			return
		case l.ctx.Err() != nil:
			return
		case time.Since(l.heldSince()) > l.ttl-every:
			l.cancel(fmt.Errorf("%w: %q could not be renewed before it expires: %w", ErrLeaseLost, l.key, err))
			return
		default:
			l.log.Warn("lease renewal failed, retrying", "lease", l.key, "err", err)
		}
	}
}

// WrapLost returns err wrapped in sentinel (the caller's "lease lost"
// error) when err comes from losing the lease: work cancelled because it
// was lost, or ErrLeaseLost, ErrLeaseNotHeld or ErrNoIntent from the
// catalog (a renewal, intent or swap refused for want of the lease, or
// intents claimed by its next holder). Other errors are returned as is.
func (l *Lease) WrapLost(err, sentinel error) error {
	if err == nil {
		return nil
	}
	if lost := l.Lost(); lost != nil && !errors.Is(err, ErrLeaseLost) {
		err = fmt.Errorf("%w (%w)", lost, err)
	}
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrLeaseNotHeld) || errors.Is(err, ErrNoIntent) {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}
