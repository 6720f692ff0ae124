package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, c := range []struct {
		name, override string
		bi             *debug.BuildInfo
		want           string
	}{
		{"override wins", "v1.2.3-4-gabc", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v1.2.3-4-gabc"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261125-502a939abcde+dirty"}}, "v0.0.0-20261125-502a939abcde+dirty"},
		{"devel falls to vcs", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("502a939abcdef0123456789", "false")}, "502a939abcde"},
		{"dirty", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("502a939abcdef0123456789", "true")}, "502a939abcde-dirty"},
		{"nothing known", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"no build info", "", nil, "devel"},
	} {
		if got := resolve(c.override, c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if String() == "" || String() == "(devel)" || String() == "dev" {
		t.Fatalf("String() = %q", String())
	}
}
