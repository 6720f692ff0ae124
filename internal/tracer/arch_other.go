//go:build !amd64

package tracer

import "runtime"

func archDetail() string {
	return runtime.GOARCH + ": the kernel program is built for x86_64 only (go generate adds other targets)"
}
