package process

// NameGroupsByNumber makes the driver signal process groups by number, as
// on a kernel before 6.9, until restore is called.
func NameGroupsByNumber() (restore func()) {
	old := groupByNumber.Load()
	groupByNumber.Store(true)
	return func() { groupByNumber.Store(old) }
}
