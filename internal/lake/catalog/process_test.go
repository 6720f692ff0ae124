package catalog

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/waittest"
)

const childEnv = "SLUICE_CATALOG_TEST_CHILD" // "<dsn>|<writer name>"

// TestCrossProcessWrites runs writers in real child processes (this test
// binary re-executed) against one SQLite file, so file locking between
// processes is exercised, not only between handles of one process; and
// likewise against one PostgreSQL schema.
func TestCrossProcessWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	forEachDialect(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		c := tg.open(t)
		const children = 3
		var wg sync.WaitGroup
		for i := range children {
			wg.Go(func() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcessChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|p%d", childEnv, tg.dsn, i))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("child %d: %v\n%s", i, err, out)
				}
			})
		}
		// The parent writes meanwhile.
		for b := range childBatches {
			s := seg("metrics", "parent", b%24, fmt.Sprintf("parent-%d", b), 0, 1)
			if err := c.AddSegmentsWithQueue(ctx, QueueCommit{"parent", int64(b + 1)}, s); err != nil {
				t.Error(err)
			}
		}
		waittest.Wait(t, &wg, "the concurrent writers")
		if n := len(mustList(t, c, Filter{})); n != (children+1)*childBatches {
			t.Fatalf("%d segments, want %d", n, (children+1)*childBatches)
		}
		// Children take and release a shared lease; none may leak.
		if ok, err := c.TryLease(ctx, "shared", "parent", time.Minute); err != nil || !ok {
			t.Fatalf("lease still held after children exited: %v %v", ok, err)
		}
	})
}

const childBatches = 25

func TestCrossProcessChild(t *testing.T) {
	arg := os.Getenv(childEnv)
	if arg == "" {
		t.Skip("helper for TestCrossProcessWrites")
	}
	i := strings.LastIndexByte(arg, '|')
	dsn, name := arg[:i], arg[i+1:]
	ctx := context.Background()
	c, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for b := range childBatches {
		s := seg("logs", name, b%24, fmt.Sprintf("%s-%d", name, b), 0, 1)
		if err := c.AddSegmentsWithQueue(ctx, QueueCommit{name, int64(b + 1)}, s); err != nil {
			t.Fatal(err)
		}
		ok, err := c.TryLease(ctx, "shared", name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if err := c.ReleaseLease(ctx, "shared", name); err != nil {
				t.Fatal(err)
			}
		}
	}
}
