package lake

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestQuarantineWriteList(t *testing.T) {
	root := t.TempDir()
	store := NewLocalStore(root)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, e := range []QuarantineEntry{
		{Table: TableLogs, Tenant: "acme", Position: 42, Records: 3, Time: now, Reason: "boom"},
		{Table: "garbage", Tenant: "../x", Position: 7, Time: now, Reason: "undecodable"},
		{Table: TableLogs, Tenant: "acme", Position: 42, Records: 3, Time: now, Reason: "boom again"}, // replaces
	} {
		if _, err := WriteQuarantine(store, e, []byte("body")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ListQuarantine(store)
	if err != nil {
		t.Fatal(err)
	}
	want := []QuarantineEntry{
		{Table: TableLogs, Tenant: "acme", Position: 42, Records: 3, Bytes: 4, Time: now, Reason: "boom again",
			Body: "_quarantine/logs/acme/00000000000000000042.binpb"},
		{Table: "garbage", Tenant: "_invalid", Position: 7, Bytes: 4, Time: now, Reason: "undecodable",
			Body: "_quarantine/unknown/_invalid/00000000000000000007.binpb"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("list:\n got %+v\nwant %+v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(want[0].Body))); err != nil || string(b) != "body" {
		t.Errorf("body: %q %v", b, err)
	}
	// A damaged entry is listed with its problem, not skipped.
	if err := os.WriteFile(filepath.Join(root, "_quarantine", "logs", "acme", "x.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = ListQuarantine(store)
	if err != nil || len(got) != 3 || got[1].Table != "?" || got[1].Reason == "" {
		t.Errorf("damaged entry: %+v %v", got, err)
	}
}

func FuzzQuarantineEntry(f *testing.F) {
	good, _ := json.Marshal(QuarantineEntry{Table: "logs", Tenant: "t", Position: 1, Body: "_quarantine/logs/t/1.binpb", Reason: "r"})
	f.Add(good)
	f.Add([]byte(`{"table":"logs","body":"_quarantine/../x"}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"table":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseQuarantineEntry(b)
		if err != nil {
			if !errors.Is(err, ErrBadQuarantineEntry) {
				t.Fatalf("error %v does not wrap ErrBadQuarantineEntry", err)
			}
			return
		}
		// What parses round-trips.
		js, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := ParseQuarantineEntry(js)
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip: %+v -> %s -> %+v %v", e, js, e2, err)
		}
	})
}
