module ringlm

go 1.26

require (
	github.com/dgraph-io/ristretto/v2 v2.4.2
	github.com/rs/zerolog v1.35.1
	golang.org/x/text v0.41.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/sys v0.36.0 // indirect
)
