//go:build !(linux && amd64)

package tracer

import (
	"context"
	"errors"
	"runtime"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Supported reports whether this build has the kernel program.
const Supported = false

var errUnsupported = errors.New("tracer: eBPF tracing needs Linux on x86_64 (this build is " + runtime.GOOS + "/" + runtime.GOARCH + ")")

// Tracer is unavailable on this platform.
type Tracer struct{}

// Open fails: no kernel program for this platform.
func Open(Options) (*Tracer, error) { return nil, errUnsupported }

// Lost is always 0.
func (*Tracer) Lost() uint64 { return 0 }

// DecoderStats is always empty.
func (*Tracer) DecoderStats() DecoderStats { return DecoderStats{} }

// Mode is always AttachAuto.
func (*Tracer) Mode() AttachMode { return AttachAuto }

// FallbackReason is always nil.
func (*Tracer) FallbackReason() error { return nil }

// Run fails.
func (*Tracer) Run(context.Context, func(*signal.IOEvents) error) error { return errUnsupported }

// Close does nothing.
func (*Tracer) Close() error { return nil }

func probeAttach() error { return errUnsupported }

// Attachment says the tracer is not attached.
func (*Tracer) Attachment() string { return "not attached" }

// TargetExited reports false: nothing is traced.
func (*Tracer) TargetExited() bool { return false }
