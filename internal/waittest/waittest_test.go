package waittest

import (
	"sync"
	"testing"
	"time"
)

func TestContextEndsWithTheTest(t *testing.T) {
	var ctx interface{ Err() error }
	t.Run("inner", func(t *testing.T) {
		c := Context(t)
		if dl, ok := c.Deadline(); !ok || time.Until(dl) > Limit {
			t.Fatalf("deadline %v %v, want within %v", dl, ok, Limit)
		}
		ctx = c
	})
	if ctx.Err() == nil {
		t.Fatal("the context outlived its test")
	}
}

func TestRecvAndWait(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Recv(t, ch, "seven"); v != 7 {
		t.Fatalf("Recv %d, want 7", v)
	}
	var wg sync.WaitGroup
	wg.Go(func() { time.Sleep(time.Millisecond) })
	Wait(t, &wg, "one sleeper")
}
