package stackfile

import (
	"os"
	"testing"
)

func loadReference(b *testing.B) ([]byte, *Stack) {
	b.Helper()
	data, err := os.ReadFile("../../configs/stacks/reference.yaml")
	if err != nil {
		b.Fatal(err)
	}
	st, err := Parse("reference.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	return data, st
}

func BenchmarkParseReference(b *testing.B) {
	data, _ := loadReference(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("reference.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

// Revision is computed for every instance spec; PERF-3 renders 10k.
func BenchmarkRevision(b *testing.B) {
	_, st := loadReference(b)
	svc := st.Services["api"]
	for b.Loop() {
		_ = svc.Revision()
	}
}

func BenchmarkInstanceSpec(b *testing.B) {
	_, st := loadReference(b)
	svc := st.Services["api"]
	inst := Instance{Stack: "shop", Slot: 1, ID: "a1", Bin: "/usr/bin/engenho", HostPorts: map[int]int{80: 40000}}
	for b.Loop() {
		_ = InstanceSpec(svc, inst)
	}
}

func BenchmarkPlan(b *testing.B) {
	_, st := loadReference(b)
	next := st.Clone()
	api := next.Services["api"]
	api.Deploy.Replicas = 5
	next.Services["api"] = api
	for b.Loop() {
		_ = Plan(st, next)
	}
}

func BenchmarkMarshalUnmarshal(b *testing.B) {
	_, st := loadReference(b)
	for b.Loop() {
		data, err := Marshal(st, testKey)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Unmarshal(data, testKey); err != nil {
			b.Fatal(err)
		}
	}
}
