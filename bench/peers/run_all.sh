#!/usr/bin/env bash
# ringlm's BenchmarkDecode and the PyTorch peers on one synthetic GGUF, on the
# GPU host (`make bench-gpu`; bench/peers/README.md). Go binaries are built
# elsewhere and carried:
#
#   bench/peers/run_all.sh [RINGLM_BIN [CUDA_TEST]]
#
# Environment (defaults in brackets):
#   RINGLM_BIN [.carry/ringlm]   CUDA_TEST [.carry/cuda.test]   OUT [./bench-gpu-out]
#   PEERS ["gptfast hf_cb hf_eager"] (order = run order; "" runs none)   SKIP_RINGLM [0]
#   TYPE [$RINGLM_BENCH_TYPE or bf16] weight type of the model (synth --type, RINGLM_BENCH_TYPE)
#   PRESET [$RINGLM_BENCH_PRESET or llama-3.2-1b] the model's shape (synth --preset,
#     RINGLM_BENCH_PRESET), e.g. qwen2.5-0.5b
#   GGUF [/tmp/ringlm-peers/$PRESET-$TYPE.gguf] (kept and reused if present): the peers' model.
#     ringlm's benchmark builds its own from PRESET and TYPE, so a GGUF of
#     another shape puts two models in one table: set PRESET with it.
#   RINGLM_CUDA_LIB: an already built libringlm_cuda.so (skips `make cuda`)
#   BATCHES [1,16,64,256]  GO_BENCHTIME [200x]  GPTFAST_STEPS [200]  HF_STEPS [64]
#   CB_REQUESTS [256]  CB_STEPS [64]   GPTFAST_ARGS, HF_EAGER_ARGS, HF_CB_ARGS: extra flags
#   BUDGET_S [540]: the whole run's wall-time budget; each stage is cut by
#   `timeout` to what is left (and to its own cap), so the table always comes.
# Files under $OUT (at most 7): run.log, go-bench.txt, gptfast.json,
# hf_eager.json, hf_cb.json, table.md.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD

RINGLM_BIN=${1:-${RINGLM_BIN:-.carry/ringlm}}
CUDA_TEST=${2:-${CUDA_TEST:-.carry/cuda.test}}
OUTDIR=${OUT:-$ROOT/bench-gpu-out}
PEERS=${PEERS-gptfast hf_cb hf_eager}
SKIP_RINGLM=${SKIP_RINGLM:-0}
TYPE=${TYPE:-${RINGLM_BENCH_TYPE:-bf16}}
PRESET=${PRESET:-${RINGLM_BENCH_PRESET:-llama-3.2-1b}}
GGUF=${GGUF:-/tmp/ringlm-peers/$PRESET-$TYPE.gguf}
BATCHES=${BATCHES:-1,16,64,256}
GO_BENCHTIME=${GO_BENCHTIME:-200x}
GPTFAST_STEPS=${GPTFAST_STEPS:-200}
HF_STEPS=${HF_STEPS:-64}
CB_REQUESTS=${CB_REQUESTS:-256}
CB_STEPS=${CB_STEPS:-64}
BUDGET_S=${BUDGET_S:-540}

mkdir -p "$OUTDIR" "$(dirname "$GGUF")"
OUTDIR=$(cd "$OUTDIR" && pwd)
exec > >(tee -a "$OUTDIR/run.log") 2>&1
TEE_PID=$!

export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/ringlm-peers/inductor}

abs() { case "$1" in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
stage() { echo; echo "== [$(date -u +%H:%M:%S) +${SECONDS}s] $*"; }
# left CAP: seconds this stage may take: its cap, or what the budget has left
# (less 15 s for the table), whichever is smaller.
left() { local l=$((BUDGET_S - SECONDS - 15)); [ "$1" -lt "$l" ] && l=$1; echo "$l"; }
run_capped() { # CAP NAME CMD...: run with a timeout, report how it ended
  local cap=$1 name=$2; shift 2
  local t; t=$(left "$cap")
  if [ "$t" -lt 20 ]; then echo "$name: skipped, only ${t}s of the budget left"; return 0; fi
  local t0=$SECONDS
  # A peer is told its deadline too, so it skips a batch size that would not
  # fit and still writes a complete JSON; timeout is the backstop.
  if [ "${1:-}" = python3 ]; then set -- "$@" --deadline $((t - 15)); fi
  timeout -k 10 "$t" "$@"
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "$name: CUT at its limit of ${t}s (rc $rc)"
  elif [ $rc -ne 0 ]; then echo "$name: FAILED (rc $rc)"; fi
  echo "$name: $((SECONDS - t0))s"
  return 0
}

stage "bench-gpu: out $OUTDIR, model $GGUF ($PRESET, $TYPE), peers '${PEERS}', budget ${BUDGET_S}s"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null || echo "nvidia-smi: unavailable"
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
git log -1 --format='commit %h %s' 2>/dev/null || true

# --- setup: the CUDA library and the synthetic model, side by side ---
stage "setup: make cuda + ringlm synth"
LIB=${RINGLM_CUDA_LIB:-}
BUILD_PID=
if [ "$SKIP_RINGLM" != 1 ]; then
  if [ -n "$LIB" ] && [ -f "$LIB" ]; then
    echo "using RINGLM_CUDA_LIB=$LIB (no build)"
  else
    LIB=$ROOT/kernels/cuda/libringlm_cuda.so
    ( t0=$SECONDS
      if command -v make >/dev/null; then timeout "$(left 480)" make -s cuda
      else timeout "$(left 480)" nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
             -gencode=arch=compute_90,code=compute_90 -Xcompiler -fPIC -shared -o "$LIB" kernels/cuda/*.cu; fi
      echo "make cuda: rc $? in $((SECONDS - t0))s" ) &
    BUILD_PID=$!
  fi
fi
RB=$(abs "$RINGLM_BIN")
if [ -s "$GGUF" ]; then
  echo "model: reusing $GGUF ($(du -h "$GGUF" | cut -f1))"
elif [ -x "$RB" ] || chmod +x "$RB" 2>/dev/null; then
  t0=$SECONDS
  # Written beside and renamed, so a run cut short never leaves a partial model to be reused.
  if timeout "$(left 240)" "$RB" synth --preset "$PRESET" --type "$TYPE" --seed 1 -o "$GGUF.part"; then
    mv -f "$GGUF.part" "$GGUF"
  else echo "synth failed"; rm -f "$GGUF.part"; fi
  echo "synth: $((SECONDS - t0))s"
else
  echo "no ringlm binary at $RB: cannot write the model"
fi
[ -n "$BUILD_PID" ] && wait "$BUILD_PID"
[ -s "$GGUF" ] || { echo "no model file; stopping"; exit 1; }

# --- ringlm: BenchmarkDecode (writes its own copy of the same model: seed 1, same preset and type) ---
if [ "$SKIP_RINGLM" != 1 ]; then
  stage "ringlm BenchmarkDecode (benchtime $GO_BENCHTIME)"
  CT=$(abs "$CUDA_TEST")
  [ -x "$CT" ] || chmod +x "$CT" 2>/dev/null
  if [ ! -x "$CT" ]; then echo "no cuda.test binary at $CT" | tee "$OUTDIR/go-bench.txt"
  elif [ ! -f "$LIB" ]; then echo "no $LIB (make cuda failed?)" | tee "$OUTDIR/go-bench.txt"
  else
    (cd kernels/cuda && export RINGLM_CUDA_LIB=$LIB RINGLM_BENCH_TYPE=$TYPE RINGLM_BENCH_PRESET=$PRESET &&
       run_capped 240 "ringlm BenchmarkDecode" "$CT" -test.run '^$' -test.bench Decode -test.benchtime "$GO_BENCHTIME") \
       2>&1 | tee "$OUTDIR/go-bench.txt"
  fi
fi

# --- the peers, each on the same GGUF ---
for p in $PEERS; do
  case $p in
    gptfast)
      stage "peer gptfast: torch.compile reduce-overhead, batches $BATCHES, $GPTFAST_STEPS steps"
      run_capped 240 gptfast python3 bench/peers/gptfast.py --gguf "$GGUF" --batch "$BATCHES" \
        --steps "$GPTFAST_STEPS" --json "$OUTDIR/gptfast.json" ${GPTFAST_ARGS:-} ;;
    hf_eager)
      stage "peer hf_eager: transformers generate, batches $BATCHES, $HF_STEPS steps"
      run_capped 120 hf_eager python3 bench/peers/hf_eager.py --gguf "$GGUF" --batch "$BATCHES" \
        --steps "$HF_STEPS" --json "$OUTDIR/hf_eager.json" ${HF_EAGER_ARGS:-} ;;
    hf_cb)
      stage "peer hf_cb: transformers generate_batch, $CB_REQUESTS requests x $CB_STEPS tokens"
      run_capped 150 hf_cb python3 bench/peers/hf_cb.py --gguf "$GGUF" --requests "$CB_REQUESTS" \
        --steps "$CB_STEPS" --json "$OUTDIR/hf_cb.json" ${HF_CB_ARGS:-} ;;
    *) echo "unknown peer '$p' (gptfast, hf_eager, hf_cb)" ;;
  esac
done

stage "table"
python3 bench/peers/table.py --dir "$OUTDIR" --out "$OUTDIR/table.md"
stage "bench-gpu: done in ${SECONDS}s"
exec 1>&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit 0
