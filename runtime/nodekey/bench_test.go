package nodekey

import (
	"bytes"
	"testing"
)

// What sealing costs a deployment: one Seal per secret value per journal
// write, one Open per read, one Digest per value per BindSecrets.
func BenchmarkSeal(b *testing.B) {
	k, _ := New(bytes.Repeat([]byte{1}, 32))
	for b.Loop() {
		if _, err := k.Seal("env:DB_PASSWORD", "a-64-byte-secret-value-0123456789abcdef0123456789abcdef012345"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	k, _ := New(bytes.Repeat([]byte{1}, 32))
	s, _ := k.Seal("env:DB_PASSWORD", "a-64-byte-secret-value-0123456789abcdef0123456789abcdef012345")
	for b.Loop() {
		if _, err := k.Open("env:DB_PASSWORD", s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigest(b *testing.B) {
	k, _ := New(bytes.Repeat([]byte{1}, 32))
	for b.Loop() {
		k.Digest("env:DB_PASSWORD", "a-64-byte-secret-value-0123456789abcdef0123456789abcdef012345")
	}
}
