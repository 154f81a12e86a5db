package edge

import (
	"strconv"

	"github.com/anthdm/hollywood/actor"
	"github.com/engenho/engenho/messages"
)

// answerBox is a one-shot hollywood process that takes a host actor's
// HostWakeResult for one waiting request. It is like hollywood's Response,
// but the edge waits on it with its own clock (SUP-19) and the request's
// context.
type answerBox struct {
	pid *actor.PID
	ch  chan messages.HostWakeResult
}

func newAnswerBox(e *actor.Engine, n uint64) *answerBox {
	return &answerBox{
		pid: actor.NewPID(e.Address(), "edge/wake/"+strconv.FormatUint(n, 10)),
		ch:  make(chan messages.HostWakeResult, 1),
	}
}

func (b *answerBox) PID() *actor.PID { return b.pid }

// Send keeps the first answer; anything else is dropped.
func (b *answerBox) Send(_ *actor.PID, msg any, _ *actor.PID) {
	if res, ok := msg.(messages.HostWakeResult); ok {
		select {
		case b.ch <- res:
		default:
		}
	}
}

func (b *answerBox) Start()                  {}
func (b *answerBox) Invoke([]actor.Envelope) {}
func (b *answerBox) Shutdown()               {}
