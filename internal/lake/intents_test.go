package lake

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/lake/catalog"
)

func putObject(t *testing.T, s Store, p string) {
	t.Helper()
	w, err := s.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func objects(t *testing.T, s Store) []string {
	t.Helper()
	var out []string
	if err := s.Walk("", func(p string, _ int64) error { out = append(out, p); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func intentOwners(t *testing.T, cat *catalog.Catalog) []string {
	t.Helper()
	ins, err := cat.Intents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.Owner+" "+in.Path)
	}
	return out
}

type failRemove struct {
	Store
	fail string
}

func (s failRemove) Remove(p string) error {
	if p == s.fail {
		return errors.New("injected")
	}
	return s.Store.Remove(p)
}

func TestRemoveAll(t *testing.T) {
	s := NewLocalStore(t.TempDir())
	for _, p := range []string{"a/1.parquet", "a/2.parquet", "a/3.parquet"} {
		putObject(t, s, p)
	}
	err := RemoveAll(failRemove{s, "a/2.parquet"}, []string{"a/1.parquet", "a/2.parquet", "a/3.parquet", "a/missing.parquet"})
	if err == nil || !slices.Equal(objects(t, s), []string{"a/2.parquet"}) {
		t.Fatalf("RemoveAll went on past a failure? err %v, left %v", err, objects(t, s))
	}
	if RemoveAll(s, nil) != nil {
		t.Fatal("nothing to remove is no error")
	}
}

// TestIntentStore: outputs written through an IntentStore are announced
// before they exist; a discarded run leaves neither files nor intents; a
// killed run's leftovers go to the next holder of the lease, and only to
// it.
func TestIntentStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := catalog.Open(ctx, filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	store := NewLocalStore(filepath.Join(dir, "lake"))
	const pdir = "logs/tenant=a/dt=2025-06-01/hour=12"
	key := "compact/" + pdir
	lease := func(owner string, ttl time.Duration) {
		t.Helper()
		if ok, err := cat.TryLease(ctx, key, owner, ttl); err != nil || !ok {
			t.Fatalf("lease for %s: %v %v", owner, ok, err)
		}
	}

	if _, err := NewIntentStore(ctx, store, cat, key, "run1").Create(pdir + "/x.parquet"); !errors.Is(err, catalog.ErrLeaseNotHeld) {
		t.Fatalf("create without the lease: %v", err)
	}
	if got := objects(t, store); len(got) != 0 {
		t.Fatalf("created without the lease: %v", got)
	}

	// A failed run: Discard removes what it created, committed or not.
	lease("run1", time.Minute)
	out := NewIntentStore(ctx, store, cat, key, "run1")
	putObject(t, out, pdir+"/a.parquet")
	w, err := out.Create(pdir + "/b.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if got := intentOwners(t, cat); !slices.Equal(got, []string{"run1 " + pdir + "/a.parquet", "run1 " + pdir + "/b.parquet"}) {
		t.Fatalf("intents %v", got)
	}
	_ = w.Abort()
	cause := errors.New("merge failed")
	if err := out.Discard(cause); err != cause {
		t.Fatalf("discard: %v", err)
	}
	if got, ins := objects(t, store), intentOwners(t, cat); len(got) != 0 || len(ins) != 0 {
		t.Fatalf("after discard: files %v, intents %v", got, ins)
	}

	// A killed run: file and intent stay behind.
	out = NewIntentStore(ctx, store, cat, key, "run1")
	putObject(t, out, pdir+"/c.parquet")
	// Its own lease still held, nobody else cleans; and the holder never
	// cleans its own.
	if n, err := CleanIntents(ctx, cat, store, key, "run2"); !errors.Is(err, catalog.ErrLeaseNotHeld) || n != 0 {
		t.Fatalf("clean by a non-holder: %d, %v", n, err)
	}
	if n, err := CleanIntents(ctx, cat, store, key, "run1"); err != nil || n != 0 {
		t.Fatalf("clean of one's own: %d, %v", n, err)
	}
	if got := objects(t, store); len(got) != 1 {
		t.Fatalf("files %v", got)
	}
	// The lease changes hands: the next holder deletes the file, then
	// the intent, and a failure to remove keeps the intent for a retry.
	if err := cat.ReleaseLease(ctx, key, "run1"); err != nil {
		t.Fatal(err)
	}
	lease("run2", time.Minute)
	if _, err := CleanIntents(ctx, cat, failRemove{store, pdir + "/c.parquet"}, key, "run2"); err == nil {
		t.Fatal("clean with a failing remove succeeded")
	}
	if got := intentOwners(t, cat); !slices.Equal(got, []string{"run2 " + pdir + "/c.parquet"}) {
		t.Fatalf("after a failed clean: intents %v", got)
	}
	if err := cat.ReleaseLease(ctx, key, "run2"); err != nil {
		t.Fatal(err)
	}
	lease("run3", time.Minute)
	if n, err := CleanIntents(ctx, cat, store, key, "run3"); err != nil || n != 1 {
		t.Fatalf("clean: %d, %v", n, err)
	}
	if got, ins := objects(t, store), intentOwners(t, cat); len(got) != 0 || len(ins) != 0 {
		t.Fatalf("after clean: files %v, intents %v", got, ins)
	}
}
