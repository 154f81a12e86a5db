package daemonconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is a byte count. In the file it is an integer (bytes) or a number
// with a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of
// 1024); units are case-insensitive.
type Size int64

// Binary size units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
)

var sizeUnits = map[string]Size{
	"": 1, "b": 1,
	"k": 1000, "kb": 1000, "m": 1000 * 1000, "mb": 1000 * 1000, "g": 1000 * 1000 * 1000, "gb": 1000 * 1000 * 1000,
	"kib": KiB, "mib": MiB, "gib": GiB,
}

// ParseSize reads a size such as "10MiB", "512k" or "1048576".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("want a byte count such as 1048576 or 10MiB")
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("byte count out of range")
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("unknown size unit %s: want B, KB, MB, GB, KiB, MiB or GiB", quote(strings.TrimSpace(t[i:])))
	}
	if n > int64(1<<62)/int64(unit) {
		return 0, fmt.Errorf("byte count out of range")
	}
	return Size(n) * unit, nil
}

// String prints the size with the largest binary unit that divides it.
func (s Size) String() string {
	switch {
	case s != 0 && s%GiB == 0:
		return strconv.FormatInt(int64(s/GiB), 10) + "GiB"
	case s != 0 && s%MiB == 0:
		return strconv.FormatInt(int64(s/MiB), 10) + "MiB"
	case s != 0 && s%KiB == 0:
		return strconv.FormatInt(int64(s/KiB), 10) + "KiB"
	}
	return strconv.FormatInt(int64(s), 10)
}
