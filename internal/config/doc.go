// Package config owns the user configuration of `sluice run`: one YAML file
// with ${ENV} expansion, embedded defaults, strict key checking, validation
// that names the offending key, and the reference documentation generated
// from the same struct tags (docs/config.md).
//
// The Config type is plain data. Turning it into component settings
// (receiver, queue, lake writer, catalog) is the pipeline's job, so this
// package depends on no component.
//
// # Invariants
//
//  1. Every key has a `doc` tag and a default in defaults.yaml (or a
//     `derived` tag saying how an empty value is derived); Reference lists
//     every key, and a test keeps docs/config.md in sync with it.
//  2. Environment references are expanded in scalar values after YAML
//     parsing, never in keys or comments, so a variable's value can never
//     change the structure of the file. An unset variable without a
//     default is an error, not an empty string: an empty bearer_token
//     would silently turn authentication off.
//  3. A key the Config type does not know is an error naming its full path
//     and line, never ignored.
//  4. Validate reports every problem at once, each prefixed with the full
//     key path.
//
// # Concurrency
//
// Functions hold no shared state; a Config is a value and safe to copy.
package config
