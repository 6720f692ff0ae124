//go:build !linux

package tracer

// Check reports that this platform cannot trace.
func Check() CheckReport {
	return CheckReport{Items: []CheckItem{{Name: "platform", Required: true, Detail: errUnsupported.Error()}}}
}
