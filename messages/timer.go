package messages

// Timer is an actor's own message: its timer Name fired. Seq tells a
// firing of the timer as armed now from a late one of a timer since
// re-armed or cancelled (actors/supervise.Timers).
type Timer struct {
	Name string
	Seq  uint64
}
