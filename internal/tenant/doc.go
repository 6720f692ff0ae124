// Package tenant owns the one rule for tenant names, shared by the
// receivers, the config and the lake: a tenant becomes a path element of the
// lake (tenant=<name>), so it is [A-Za-z0-9._-]{1,64} and never "." or "..".
// Valid runs once per request, so it avoids regexp.
package tenant
