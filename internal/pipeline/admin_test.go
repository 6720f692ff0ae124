package pipeline

import (
	"net/http"
	"strings"
	"testing"
)

// TestAdminPprof serves /debug/pprof/ only when admin.pprof is set.
func TestAdminPprof(t *testing.T) {
	off := start(t, testConfig(t))
	if code, _ := get(t, off, "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("admin.pprof false: /debug/pprof/ answered %d, want 404", code)
	}
	cfg := testConfig(t)
	cfg.Admin.Pprof = true
	on := start(t, cfg)
	if code, body := get(t, on, "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("admin.pprof true: /debug/pprof/ answered %d:\n%.300s", code, body)
	}
	if code, body := get(t, on, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("admin.pprof true: goroutine profile answered %d:\n%.300s", code, body)
	}
	if code, _ := get(t, on, "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics answered %d with pprof on", code)
	}
}
