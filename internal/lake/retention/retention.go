package retention

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/internal/lake"
	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

// Options configure Apply. Zero values take the defaults.
type Options struct {
	LeaseTTL time.Duration // default 5 min; Apply holds its leases for one catalog transaction
	Owner    string        // lease owner; default retention/host/pid/random
	Logger   *slog.Logger  // default slog.Default()
	// Store, when set, is the lake's store: right after the commit Apply
	// moves the removed files out of the Hive tree into the trash
	// (lake.FinishSwap), so a glob stops reading them at once. Without
	// it the moves stay journaled for the next sweep.
	Store lake.Store
}

// DefaultLeaseTTL is the lease TTL when Options.LeaseTTL is 0.
const DefaultLeaseTTL = 5 * time.Minute

func (o Options) withDefaults() Options {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.Owner = fmt.Sprintf("retention/%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Partition is one aged-out hour partition (one tier of it, for the
// rollup table) and the live segments it had when planned.
type Partition struct {
	Table, Tenant, Day string
	Hour               int
	Tier               string        // rollup tier; "" for other tables
	Age                time.Duration // the rule that selected it
	Segments           []catalog.Segment
	Rows, Bytes        int64
}

// Dir is the partition's directory in the lake.
func (p Partition) Dir() string { return catalog.PartitionDir(p.Table, p.Tenant, p.Day, p.Hour) }

// Start is the first instant of the partition's hour (UTC).
func (p Partition) Start() time.Time { return catalog.PartitionStart(p.Day, p.Hour) }

// End is the first instant after the partition's hour.
func (p Partition) End() time.Time { return p.Start().Add(time.Hour) }

// String names the partition for logs and plans.
func (p Partition) String() string {
	if p.Tier != "" {
		return p.Dir() + " tier=" + p.Tier
	}
	return p.Dir()
}

// LeaseKeys are the catalog leases Apply holds: the compaction lease of the
// partition, and for metrics and metrics_rollup the rollup lease of the
// raw metrics hour, in a fixed order.
func (p Partition) LeaseKeys() []string {
	keys := []string{"compact/" + p.Dir()}
	if p.Table == TableMetrics || p.Table == TableRollup {
		keys = append(keys, "rollup/"+catalog.PartitionDir(TableMetrics, p.Tenant, p.Day, p.Hour))
	}
	return keys
}

// Plan lists the partitions whose whole hour ended at or before now minus
// the age their rules give them, with their live segments, ordered by
// table, tenant, day, hour and tier. It only reads the catalog.
func Plan(ctx context.Context, cat *catalog.Catalog, rules Rules, now time.Time) ([]Partition, error) {
	if err := rules.Validate(); err != nil {
		return nil, fmt.Errorf("retention: plan: %w", err)
	}
	if !rules.Active() {
		return nil, nil
	}
	// The shortest positive age bounds what can qualify: nothing ending
	// after now-minAge does, so the catalog need not return it.
	minAge := time.Duration(0)
	for _, m := range append([]map[string]time.Duration{rules.Keep}, mapsOf(rules.Tenants)...) {
		for _, age := range m {
			if age > 0 && (minAge == 0 || age < minAge) {
				minAge = age
			}
		}
	}
	segs, err := cat.List(ctx, catalog.Filter{To: now.Add(-minAge).UnixNano()})
	if err != nil {
		return nil, fmt.Errorf("retention: plan: %w", err)
	}
	type pkey struct {
		table, tenant, day string
		hour               int
		tier               string
	}
	parts := map[pkey]*Partition{}
	for _, s := range segs {
		k := pkey{s.Table, s.Tenant, s.Day, s.Hour, ""}
		if s.Table == TableRollup {
			k.tier = TierOf(s)
		}
		p := parts[k]
		if p == nil {
			age := rules.Age(k.tenant, k.table, k.tier)
			if age <= 0 {
				continue
			}
			p = &Partition{Table: k.table, Tenant: k.tenant, Day: k.day, Hour: k.hour, Tier: k.tier, Age: age}
			if p.End().After(now.Add(-age)) {
				continue
			}
			parts[k] = p
		}
		p.Segments = append(p.Segments, s)
		p.Rows += s.Rows
		p.Bytes += s.Bytes
	}
	out := make([]Partition, 0, len(parts))
	for _, p := range parts {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Tenant, b.Tenant),
			cmp.Compare(a.Day, b.Day), cmp.Compare(a.Hour, b.Hour), cmp.Compare(a.Tier, b.Tier))
	})
	return out, nil
}

// Result says what Apply did.
type Result struct {
	Skipped     bool    // another owner holds one of the partition's leases
	Removed     []int64 // segment ids marked replaced
	Rows, Bytes int64   // of the removed segments
}

// Apply removes the partition from the catalog: under its leases it lists
// the partition's live segments again and marks them all replaced in one
// transaction, then (with Options.Store) moves their files into the trash;
// the sweeper deletes them once its grace period has passed.
// It returns Result.Skipped, without error, while another owner holds a
// lease, and catalog.ErrStale (wrapped) when a segment changed between the
// listing and the swap, which the leases make a sign of a lost lease.
func Apply(ctx context.Context, cat *catalog.Catalog, p Partition, opts Options) (Result, error) {
	opts = opts.withDefaults()
	var res Result
	var held []string
	defer func() {
		for _, key := range slices.Backward(held) {
			if err := cat.ReleaseLease(context.WithoutCancel(ctx), key, opts.Owner); err != nil {
				opts.Logger.Warn("retention lease release failed", "partition", p.String(), "lease", key, "err", err)
			}
		}
	}()
	for _, key := range p.LeaseKeys() {
		ok, err := cat.TryLease(ctx, key, opts.Owner, opts.LeaseTTL)
		if err != nil {
			return res, fmt.Errorf("retention %s: %w", p, err)
		}
		if !ok {
			res.Skipped = true
			return res, nil
		}
		held = append(held, key)
	}
	segs, err := cat.List(ctx, catalog.Filter{Table: p.Table, Tenant: p.Tenant,
		From: p.Start().UnixNano(), To: p.End().UnixNano() - 1})
	if err != nil {
		return res, fmt.Errorf("retention %s: %w", p, err)
	}
	var removed []catalog.Segment
	for _, s := range segs {
		if s.Day != p.Day || s.Hour != p.Hour || (p.Table == TableRollup && TierOf(s) != p.Tier) {
			continue
		}
		removed = append(removed, s)
		res.Removed = append(res.Removed, s.ID)
		res.Rows += s.Rows
		res.Bytes += s.Bytes
	}
	if len(res.Removed) == 0 {
		return res, nil
	}
	if err := cat.Replace(ctx, res.Removed, nil); err != nil {
		return Result{}, fmt.Errorf("retention %s: %w", p, err)
	}
	if opts.Store != nil {
		lake.FinishSwap(ctx, cat, opts.Store, removed, nil, opts.Logger)
	}
	return res, nil
}
