# ringlm — build, test, run. `make run` and `make test` work on a fresh
# machine with Go 1.26 and gcc; nothing else is installed by hand. The
# end-to-end tests also need node, npm and curl: `make test` runs them
# when those are on PATH and otherwise says in one line that it skipped
# them (every Go test has run by then).

GO        ?= go
BIN       := bin/ringlm
FUZZTIME  ?= 30s
NVCC      ?= nvcc
CUDA_ARCH ?= -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90
# CUDA_FLAGS: more nvcc flags, e.g. -DRLM_PROF_BLOCKS (kernels/cuda/README.md, Profiling)
CUDA_FLAGS ?=
# CUDA_QUANT=1 (the default): the block-quantized weight types (Q4_0 ...
# Q6_K, IQ4_*, MXFP4: Q4_K_M files) on the CUDA device too, in a module of
# their own (kernels/cuda/device_q.cu, about a minute, compiled beside
# device.cu's five); CUDA_QUANT=0 leaves it out. The other types' kernel is
# the same either way.
CUDA_QUANT ?= 1
# CUDA_TC=1 (the default): the kernel for the models whose products and
# attention run on the tensor cores (the default paths), in a module of its
# own without the CUDA-core phases (kernels/cuda/device_tc.cu, about as long
# as device.cu's, compiled beside it): ptxas spills the tensor-core code
# less there. CUDA_TC=0 leaves it out: device.cu's kernel runs every model.
CUDA_TC ?= 1
DEFAULT_MODEL := bin/default-tiny-llama.gguf
PROMPT    ?= package main\n\nimport "fmt"\n\n// fib returns the n-th Fibonacci number.\nfunc fib(n int) int {

.PHONY: all build test vet run cuda bench fuzz clean model e2e e2e-tools e2e-if-tools

# What the end-to-end tests need beyond Go and gcc; $(e2e_missing) sets
# the shell variable missing to those not on PATH (" npm curl").
E2E_TOOLS := node npm curl
e2e_missing = missing=""; for t in $(E2E_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done

all: build

build:
	$(GO) build -o $(BIN) ./cmd/ringlm

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l .); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Every Go test, under the race detector, then the end-to-end HTTP tests
# (e2e-if-tools). The Go tests come first so that a machine without node
# still runs them all.
test: vet
	$(GO) test -race -count=1 ./...
	@$(MAKE) --no-print-directory e2e-if-tools

# The end-to-end tests where node, npm and curl are installed (a failure
# fails); elsewhere one line saying which are missing, and success.
e2e-if-tools:
	@$(e2e_missing); \
	if [ -n "$$missing" ]; then echo "e2e: skipped (node/npm/curl not found:$$missing); the Go tests ran"; \
	else $(MAKE) --no-print-directory e2e; fi

# `make e2e` asked for by name fails, saying why, without its tools.
e2e-tools:
	@$(e2e_missing); \
	if [ -n "$$missing" ]; then echo "make e2e: node/npm/curl not found:$$missing (the openai npm client and curl drive the server; install them, or run make test, which skips these tests without them)" >&2; exit 1; fi

# The tiny synthetic model of the end-to-end tests (tiny llama shape,
# Mistral vocabulary).
model: build
	@[ -f $(DEFAULT_MODEL) ] || ./$(BIN) synth --preset tiny --arch llama --type f16 --seed 1 --tokenizer testdata/tokenizer/mistral.gguf.gz -o $(DEFAULT_MODEL)

# Test dependencies for node: the official openai client, pinned by
# e2e/package-lock.json, installed into e2e/node_modules (gitignored).
e2e/node_modules/.package-lock.json: e2e/package.json e2e/package-lock.json
	cd e2e && npm ci --no-audit --no-fund

# End to end: `ringlm serve` on a free loopback port, driven by the openai
# npm client and curl (node --test e2e/), then stopped with SIGTERM.
e2e: e2e-tools model e2e/node_modules/.package-lock.json
	./e2e/run.sh

# Builds the binary and continues a Go prompt with the built-in model
# (gocoder: 5M parameters trained by the project on Go's standard library,
# embedded in the binary) on the CPU, printing tok/s. PROMPT='...' for
# another prompt (\n and \t are expanded).
run: build
	@printf '%b' '$(PROMPT)'
	@./$(BIN) run -p "$$(printf '%b' '$(PROMPT)')" -n 96 --seed 42

# The CUDA device library (needs nvcc; never needed by `go build`).
cuda:
	@command -v $(NVCC) >/dev/null 2>&1 || { echo "make cuda: nvcc not found. The CUDA device is built on a machine with the CUDA toolkit (nvcc 12+); everything else runs on the CPU device."; exit 1; }
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	  $(NVCC) -O3 -std=c++17 $(CUDA_ARCH) $(CUDA_FLAGS) -Xcompiler -fPIC -c -o $$d/device.o kernels/cuda/device.cu & p1=$$!; \
	  p2=; if [ "$(CUDA_QUANT)" = 1 ]; then \
	    $(NVCC) -O3 -std=c++17 $(CUDA_ARCH) $(CUDA_FLAGS) -Xcompiler -fPIC -c -o $$d/device_q.o kernels/cuda/device_q.cu & p2=$$!; fi; \
	  p3=; if [ "$(CUDA_TC)" = 1 ]; then \
	    $(NVCC) -O3 -std=c++17 $(CUDA_ARCH) $(CUDA_FLAGS) -Xcompiler -fPIC -c -o $$d/device_tc.o kernels/cuda/device_tc.cu & p3=$$!; fi; \
	  wait $$p1; if [ -n "$$p2" ]; then wait $$p2; fi; if [ -n "$$p3" ]; then wait $$p3; fi; \
	  $(NVCC) $(CUDA_ARCH) -shared -o kernels/cuda/libringlm_cuda.so $$d/*.o

# Benchmarks (go test -bench); figures go to bench/RESULTS.md by hand.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Short runs of every fuzz target (FUZZTIME each).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

clean:
	rm -rf bin e2e/node_modules

# On the GPU host: ringlm's BenchmarkDecode and the PyTorch peers (gpt-fast-
# style torch.compile, HF eager generate, HF continuous batching) on one
# synthetic GGUF, with the Go binaries carried in (RINGLM_BIN, CUDA_TEST);
# one markdown table at the end. See bench/peers/README.md.
.PHONY: bench-gpu
bench-gpu:
	bash bench/peers/run_all.sh
