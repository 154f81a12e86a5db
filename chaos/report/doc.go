// Package report is a chaos campaign's report (spec CHS-5): per fault
// kind, how many were injected and recovered, the p50/p99/max time to
// recover, and every violation with its seed, fault, invariant and
// evidence; rendered as JSON and Markdown.
//
// Layer: chaos. It imports chaos/invariant and chaos/schedule.
package report
