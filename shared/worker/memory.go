package worker

import (
	"context"

	"github.com/mirrorfleet/mirrorfleet/shared/membudget"
)

// admitMemory reserves what the fetch of j is expected to need (membudget.Start from
// the mirror's size and what the repo's last fetch of the same kind came to need) and
// waits, within ctx, until the worker's memory pool grants it. The returned context
// grows the reservation at the pack header (membudget.Pool.Admit). No pool: nothing
// to wait for.
func (w *Worker) admitMemory(ctx context.Context, j Job, cloned bool) (context.Context, *membudget.Fetch, error) {
	pool := w.cfg.Memory
	if pool == nil {
		return ctx, nil, nil
	}
	w.mu.Lock()
	var size, prev int64
	if r, ok := w.repos[j.Target.ID]; ok {
		if cloned {
			size, prev = r.rec.SizeBytes, r.memUpdate
		} else {
			prev = r.memClone
		}
	}
	w.mu.Unlock()
	per := int64(membudget.PerObject) // a first mirror's pack is indexed from disk
	if cloned {
		per = membudget.PerObjectUpdate
	}
	return pool.Admit(ctx, membudget.Start(size, prev), membudget.Start(size, 0), per)
}

// doneMemory releases a fetch's reservation and remembers what it came to need, for
// the repo's next fetch of the same kind.
func (w *Worker) doneMemory(j Job, cloned bool, f *membudget.Fetch) {
	if f == nil {
		return
	}
	f.Release()
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.repos[j.Target.ID]; ok {
		if cloned {
			r.memUpdate = f.Need()
		} else {
			r.memClone = f.Need()
		}
	}
}
