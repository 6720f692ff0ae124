// Package unsafex holds the project's only unsafe string/byte conversions.
//
// Each function documents how long its result stays valid. Nothing else in
// sluice imports "unsafe" for string conversions.
package unsafex
