package fetch

import "context"

// PackObjectsFunc is told the object count a pack declares in its header, as soon as
// the header has arrived and before the fetcher indexes any object (its memory grows
// with that count). It may block, within ctx, until the memory is there; an error
// ends the fetch.
type PackObjectsFunc func(ctx context.Context, objects int64) error

type packObjectsKey struct{}

// WithPackObjects returns a context whose syncs call fn with each pack's declared
// object count.
func WithPackObjects(ctx context.Context, fn PackObjectsFunc) context.Context {
	return context.WithValue(ctx, packObjectsKey{}, fn)
}

// PackObjectsOf is the function WithPackObjects put in ctx, or nil.
func PackObjectsOf(ctx context.Context) PackObjectsFunc {
	fn, _ := ctx.Value(packObjectsKey{}).(PackObjectsFunc)
	return fn
}
