// Command genheader writes kernels/cuda/ring.h from package ringbuf. It
// runs from `go generate ./ringbuf` (in the ringbuf directory):
//
//	go run ./internal/genheader -o ../kernels/cuda/ring.h
package main

import (
	"flag"
	"fmt"
	"os"

	"ringlm/ringbuf/internal/cheader"
)

func main() {
	out := flag.String("o", "../kernels/cuda/ring.h", "header to write")
	src := flag.String("src", ".", "directory of the ringbuf sources")
	flag.Parse()
	if err := cheader.WriteFile(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "genheader:", err)
		os.Exit(1)
	}
}
