package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/stats"
	"github.com/sluice-dev/sluice/internal/tui"
)

func newTopCmd() *cobra.Command {
	var (
		base, token, tenant string
		interval            time.Duration
		limit               int
		once                bool
	)
	c := &cobra.Command{
		Use:   "top [--url URL] [--token TOKEN] [--interval 2s] [--once]",
		Short: "Live view of a running sluice: rates, queue, exporters, lake, top metrics, rules",
		Long: `Show a running 'sluice run' live, in the manner of 'vector top': request rates per
receiver and tenant, queue depth and the lake's lag, exporters and their circuit
breakers, lake checkpoints, the top metrics by active series and samples/s, and the
processing rules by effect. It reads GET /api/v1/status/sluice of the query API
(query.addr), so it works against a remote process too; docs/stats.md documents
the endpoint.

Keys: tab or 1-4 section, s sort metrics (series, samples/s, bytes/s, name),
up/down select, r refresh, q quit.

With --once it prints every section as plain text and exits: for scripts. It
takes two documents --interval apart so that rates show (--interval 0: one
document, no rates).

The token (--token, or $SLUICE_TOKEN) needs the read scope; a token bound to a
tenant sees that tenant's rows only.`,
		Example: `  sluice top
  sluice top --url https://sluice.example:9090 --token "$TOKEN"
  sluice top --once --interval 1s`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if interval < 0 || (!once && interval < 100*time.Millisecond) {
				return usageError{fmt.Errorf("--interval %v: want at least 100ms (0 only with --once)", interval)}
			}
			if limit < 1 || limit > 10_000 {
				return usageError{fmt.Errorf("--limit %d: want 1..10000", limit)}
			}
			if token == "" {
				token = os.Getenv("SLUICE_TOKEN")
			}
			u, err := statusURL(base, limit)
			if err != nil {
				return usageError{err}
			}
			fetch := statusFetcher(u, token, tenant)
			model := tui.NewTopModel(fetch, base, interval)
			ctx := c.Context()
			if once {
				st, err := fetch(ctx)
				if err != nil {
					return err
				}
				model.Observe(st, nil)
				if interval > 0 {
					select {
					case <-time.After(interval):
					case <-ctx.Done():
						return ctx.Err()
					}
					if st, err = fetch(ctx); err != nil {
						return err
					}
					model.Observe(st, nil)
				}
				_, err = io.WriteString(c.OutOrStdout(), model.RenderAll()+"\n")
				return err
			}
			p := tea.NewProgram(model, tea.WithContext(ctx), tea.WithInput(c.InOrStdin()), tea.WithOutput(c.OutOrStdout()))
			if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
				return err
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&base, "url", "http://"+defaultQueryAddr, "base URL of the sluice query API (query.addr)")
	f.StringVar(&token, "token", "", "bearer token with the read scope (default $SLUICE_TOKEN)")
	f.StringVar(&tenant, "tenant", "", "tenant header value (X-Scope-OrgID) for the request; a bound token implies its own")
	f.DurationVar(&interval, "interval", 2*time.Second, "refresh interval")
	f.IntVar(&limit, "limit", 20, "metrics per list (top by series and top by samples/s)")
	f.BoolVar(&once, "once", false, "print every section as plain text once and exit (alias --headless)")
	f.BoolVar(&once, "headless", false, "same as --once")
	return c
}

func statusURL(base string, limit int) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q: want http(s)://host:port", base)
	}
	u.Path += "/api/v1/status/sluice"
	u.RawQuery = "limit=" + strconv.Itoa(limit)
	return u.String(), nil
}

// statusFetcher reads the status document; an error names the URL and
// the server's own message.
func statusFetcher(u, token, tenant string) tui.FetchFunc {
	client := &http.Client{Timeout: 30 * time.Second}
	return func(ctx context.Context) (*stats.Status, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if tenant != "" {
			req.Header.Set("X-Scope-OrgID", tenant)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", u, err)
		}
		defer resp.Body.Close()
		var body struct {
			Status string        `json:"status"`
			Error  string        `json:"error"`
			Data   *stats.Status `json:"data"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&body); err != nil {
			// A proxy's login page, another server on the port, a cut
			// answer: say what came, not only the JSON error.
			return nil, fmt.Errorf("GET %s: %s: the answer (%s) is not a sluice status document: %v",
				u, resp.Status, tui.Printable(cmp.Or(resp.Header.Get("Content-Type"), "no content type")), err)
		}
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return nil, fmt.Errorf("GET %s: %s: %s (--token or $SLUICE_TOKEN: a token with the read scope)", u, resp.Status, tui.Printable(body.Error))
		case resp.StatusCode != http.StatusOK || body.Status != "success":
			return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, tui.Printable(body.Error))
		case body.Data == nil:
			return nil, fmt.Errorf("GET %s: %s: the answer has no status document (data); is this a sluice query API?", u, resp.Status)
		case !(body.Data.Time > 0):
			// Another API's data decodes into an empty document: a
			// sluice always sends its time.
			return nil, fmt.Errorf("GET %s: %s: the answer is not a sluice status document (no time); is this a sluice query API?", u, resp.Status)
		}
		return body.Data, nil
	}
}
