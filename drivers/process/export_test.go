package process

// NameGroupsByNumber makes the driver signal process groups by number, as
// on a kernel before 6.9, until restore is called.
func NameGroupsByNumber() (restore func()) {
	old := groupByNumber.Load()
	groupByNumber.Store(true)
	return func() { groupByNumber.Store(old) }
}

// LogCheck says how the driver checks name's output file for rotation:
// hot (checked at every tick), watched (left to inotify), and whether the
// rotation tick is armed at all.
func (d *Driver) LogCheck(name string) (hot, watched, armed bool) {
	d.mu.Lock()
	in := d.instances[name]
	d.mu.Unlock()
	d.logMu.Lock()
	defer d.logMu.Unlock()
	_, hot = d.logHot[in]
	_, watched = d.logWds[in]
	return hot, watched, d.rotation != nil
}
