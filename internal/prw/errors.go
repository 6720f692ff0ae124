package prw

import (
	"errors"
	"fmt"
	"strings"
)

// ErrMalformed marks a message that is not a valid protobuf encoding of the
// request: nothing of it is kept (invariant 2).
var ErrMalformed = errors.New("malformed remote-write request")

// maxProblems is how many problems a PartialError names; the rest are counted.
const maxProblems = 5

// PartialError reports series dropped for invalid data while the good
// series of the same request were kept (invariant 3). A receiver answers
// it with 400 after acknowledging what was kept.
type PartialError struct {
	Dropped  int      // series dropped
	Problems []string // the first maxProblems problems, each naming its series
}

func (e *PartialError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d invalid series dropped: %s", e.Dropped, strings.Join(e.Problems, "; "))
	if n := e.Dropped - len(e.Problems); n > 0 {
		fmt.Fprintf(&sb, "; and %d more", n)
	}
	return sb.String()
}

func malformed(what string, at int) error {
	return fmt.Errorf("%w: %s at byte %d", ErrMalformed, what, at)
}
