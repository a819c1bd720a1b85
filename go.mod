module ringlm

go 1.26

require (
	github.com/dgraph-io/ristretto/v2 v2.4.2
	github.com/google/uuid v1.6.0
	github.com/mattn/go-isatty v0.0.20
	github.com/rs/zerolog v1.35.1
	github.com/valyala/fasthttp v1.74.0
	go.uber.org/automaxprocs v1.6.0
	golang.org/x/text v0.41.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/molecule-man/go-brrr v1.0.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
