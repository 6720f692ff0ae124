package tracer

import (
	"errors"
	"fmt"
	"strings"
)

// CheckItem is one thing the tracer needs, and whether this machine has it.
type CheckItem struct {
	Name     string
	OK       bool
	Required bool   // false: informational; tracing works without it
	Detail   string // what was found, or what to do
}

// CheckReport is what `sluice trace --check` prints.
type CheckReport struct {
	Items []CheckItem
}

// Err names every missing requirement, or is nil when tracing can start.
func (r CheckReport) Err() error {
	var missing []string
	for _, it := range r.Items {
		if it.Required && !it.OK {
			missing = append(missing, it.Name+": "+it.Detail)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("tracer: this machine cannot trace: " + strings.Join(missing, "; "))
}

// String renders the report, one line per item.
func (r CheckReport) String() string {
	var b strings.Builder
	for _, it := range r.Items {
		mark := "ok  "
		switch {
		case !it.OK && it.Required:
			mark = "FAIL"
		case !it.OK:
			mark = "--  "
		}
		fmt.Fprintf(&b, "%s %-20s %s\n", mark, it.Name, it.Detail)
	}
	return b.String()
}
