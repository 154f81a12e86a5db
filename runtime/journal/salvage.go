package journal

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Import writes records salvaged from another journal (`reinit journal`)
// into this one, which must hold none of them yet: every record is
// checked to be one of the journal's own (its key under v1/, its value
// JSON) and the whole set is written in synced batches. Events and boot
// attempts are not imported; the last event number is, so numbers are
// never handed out twice. The event log reads that number when the
// journal opens: close the journal and open it again before it takes
// events.
func (j *Journal) Import(records []Record) (int, error) {
	if j.LastSeq() > 0 {
		return 0, invalid("import", "the journal already holds events: import only into a new journal")
	}
	n := 0
	for len(records) > 0 {
		batch := records
		if len(batch) > 1000 {
			batch = batch[:1000]
		}
		records = records[len(batch):]
		err := j.update(func(txn *writeTxn) error {
			for _, r := range batch {
				if !strings.HasPrefix(r.Key, keyVersion) || !json.Valid(r.Value) {
					return invalid("import", "record %q is not a journal record", r.Key)
				}
				if k := recordKind(r.Key); k == "event" || k == "boot" {
					continue
				}
				if err := txn.Set([]byte(r.Key), append([]byte(nil), r.Value...)); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("journal: import: %w", err)
		}
	}
	return n, nil
}
