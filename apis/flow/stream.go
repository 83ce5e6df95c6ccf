package flow

import "context"

// Stream is the body of a Source's Flows: it sends the records of kept that pass f, oldest
// first, then, with follow, each record arriving on live that passes f, until ctx is done. The
// caller subscribes live before it snapshots kept, so that no record is missed or sent twice.
func Stream(ctx context.Context, f Filter, kept []Record, follow bool, live <-chan Record, send func(Record) error) error {
	for _, r := range kept {
		if !f.Match(r) {
			continue
		}
		if err := send(r); err != nil {
			return err
		}
	}
	if !follow {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-live:
			if !f.Match(r) {
				continue
			}
			if err := send(r); err != nil {
				return err
			}
		}
	}
}
