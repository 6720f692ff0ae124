package tracer

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/sluice-dev/sluice/internal/signal"
)

// Weight is what a folded stack counts.
type Weight int

// Weights.
const (
	WeightCount    Weight = iota // calls
	WeightDuration               // ns in the call
	WeightBytes                  // bytes moved
)

// ParseWeight parses count, duration or bytes.
func ParseWeight(s string) (Weight, error) {
	switch s {
	case "count":
		return WeightCount, nil
	case "duration":
		return WeightDuration, nil
	case "bytes":
		return WeightBytes, nil
	}
	return 0, fmt.Errorf("unknown weight %q (want count, duration or bytes)", s)
}

// maxFoldedStacks bounds the distinct stacks; calls past it fold into
// comm;syscall;(other_paths).
const maxFoldedStacks = 1 << 20

// Folded aggregates calls into folded stacks, comm;syscall;path;components,
// for flamegraph.pl, inferno or speedscope. Used by one goroutine.
type Folded struct {
	weight Weight
	stacks map[string]*int64
	key    []byte
}

// NewFolded returns an empty aggregate weighted by w.
func NewFolded(w Weight) *Folded { return &Folded{weight: w, stacks: make(map[string]*int64)} }

// Add aggregates every row of b.
func (f *Folded) Add(b *signal.IOEvents) {
	for i := range b.Len() {
		var w int64
		switch f.weight {
		case WeightCount:
			w = 1
		case WeightDuration:
			w = b.Duration[i]
		case WeightBytes:
			w = b.Bytes[i]
		}
		if w <= 0 {
			continue
		}
		k := appendFrame(f.key[:0], b.StrBytes(b.Comm[i]))
		k = append(k, ';')
		k = append(k, b.SyscallName(i)...)
		path := b.StrBytes(b.Path[i])
		if len(path) == 0 {
			k = append(k, ";(no_path)"...)
		}
		for c := range splitPath(path) {
			k = appendFrame(append(k, ';'), c)
		}
		if _, ok := f.stacks[string(k)]; !ok && len(f.stacks) >= maxFoldedStacks {
			k = appendFrame(k[:0], b.StrBytes(b.Comm[i]))
			k = append(append(append(k, ';'), b.SyscallName(i)...), ";(other_paths)"...)
		}
		f.key = k
		p := f.stacks[string(k)] // no allocation: the lookup does not keep the key
		if p == nil {
			p = new(int64)
			f.stacks[string(k)] = p
		}
		*p += w
	}
}

// splitPath yields the non-empty components of a slash-separated path.
func splitPath(path []byte) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(path) > 0 {
			j := 0
			for j < len(path) && path[j] != '/' {
				j++
			}
			if j > 0 && !yield(path[:j]) {
				return
			}
			path = path[min(j+1, len(path)):]
		}
	}
}

// WriteTo writes one "stack weight" line per stack, sorted by stack.
func (f *Folded) WriteTo(w io.Writer) (int64, error) {
	keys := make([]string, 0, len(f.stacks))
	for k := range f.stacks {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(a, b) })
	bw := bufio.NewWriter(w)
	var n int64
	var line []byte
	for _, k := range keys {
		line = append(append(append(line[:0], k...), ' '), strconv.FormatInt(*f.stacks[k], 10)...)
		line = append(line, '\n')
		m, err := bw.Write(line)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

// Len is the number of distinct stacks.
func (f *Folded) Len() int { return len(f.stacks) }
