package version

import (
	"runtime/debug"
	"sync"
)

// override is set at link time by the Makefile's build.
var override string

// Prometheus is the Prometheus version whose HTTP API the query API
// serves, reported as buildinfo's version for Grafana.
const Prometheus = "3.0.0"

// String returns sluice's version (see the package doc).
func String() string { return resolved() }

var resolved = sync.OnceValue(func() string {
	bi, _ := debug.ReadBuildInfo()
	return resolve(override, bi)
})

// resolve picks the version from an override and the build info (nil if
// unavailable).
func resolve(override string, bi *debug.BuildInfo) string {
	if override != "" {
		return override
	}
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "-dirty"
	}
	return rev
}

// Revision returns the VCS revision the binary was built from, "" if
// unknown.
func Revision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

// BuildDate is the commit time of the build's revision (RFC 3339), or ""
// when the binary was built without version control information.
func BuildDate() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.time" {
				return s.Value
			}
		}
	}
	return ""
}
