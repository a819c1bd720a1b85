package httpapi

import (
	"net/http/pprof"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Go's profiler under /debug/pprof/ (--debug): net/http/pprof's handlers
// through fasthttp's adaptor. The index lists the profiles; a named one
// (heap, goroutine, allocs, block, mutex, threadcreate) comes from the
// index handler too, as in net/http. /debug/pprof/trace is Go's
// execution trace, not the engine's (/debug/trace).
var (
	pprofIndex   = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Index)
	pprofCmdline = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Cmdline)
	pprofProfile = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Profile)
	pprofSymbol  = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Symbol)
	pprofTrace   = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Trace)
)

func (s *Server) pprof(ctx *fasthttp.RequestCtx, r *req) {
	switch string(ctx.Path()) {
	case "/debug/pprof":
		ctx.Redirect("/debug/pprof/", fasthttp.StatusMovedPermanently) // the index's links are relative
	case "/debug/pprof/cmdline":
		pprofCmdline(ctx)
	case "/debug/pprof/profile":
		pprofProfile(ctx)
	case "/debug/pprof/symbol":
		pprofSymbol(ctx)
	case "/debug/pprof/trace":
		pprofTrace(ctx)
	default:
		pprofIndex(ctx)
	}
}
