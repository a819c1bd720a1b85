#!/bin/bash
# Round 114 (measurements only, main's kernel: tcmod): where a decode step goes at batch 16 and 256 (profiles, per phase
# and per block), and the HTTP benchmark at concurrency 256 with other step budgets (--token-budget 512, 1024, 4096
# against the default 2048), each on prompts the server has not seen.
set -u; k=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /tmp/r && for f in .carry/lib/*.so.gz; do n=$(basename $f .so.gz); gunzip -c $f > /tmp/r/$n.so; done
gunzip -c .carry/cuda.test.gz > /tmp/r/c.test && chmod +x /tmp/r/c.test
gunzip -c .carry/ringlm.gz > /tmp/r/ringlm && chmod +x /tmp/r/ringlm
R=/tmp/r/ringlm L=/tmp/r/tcmod.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(cd kernels/cuda
for p in 1 2; do for b in 'Decode/batch1$' 'Decode/batch16$' 'Decode/batch64$' 'Decode/batch256$' 'Prefill/prompt2048$'; do
  [ $p = 2 ] && [ "$b" = 'Prefill/prompt2048$' ] && continue
  f=$OUT/prof$p-$(echo $b | tr -dc 'a-z0-9').log; el "profile=$p $b"
  RINGLM_CUDA_PROFILE=$p RINGLM_CUDA_LIB=$L timeout 60 /tmp/r/c.test -test.run '^$' -test.bench "$b" -test.benchtime 5x > $f 2>&1
  grep -E '^Benchmark|ringlm cuda profile' $f | cut -c1-400 | head -40
done; done)
$R synth --preset llama-3.2-1b --type bf16 --seed 1 -o /tmp/1b.gguf > /dev/null || exit 1
run() { # concurrency seed tag
  local c=$1 s=$2; n=$((c < 16 ? 32 : 4 * c)); k=$((k + 1))
  el "run $k ($3): concurrency $c, seed $s, $n prompts"
  $R bench serve --url http://127.0.0.1:18080 --num-prompts $n --concurrency $c --input-len 128 --output-len 128 --seed $s --no-progress > $OUT/http-$k-$3-c$c.txt 2>&1
  grep -E "Output token throughput|Median TTFT|Median TPOT|Successful|Failed" $OUT/http-$k-$3-c$c.txt | tr -s ' ' | paste -sd';'
}
for B in 2048 1024 512 4096; do
  el "serve --token-budget $B"; RINGLM_CUDA_LIB=$L $R serve -m /tmp/1b.gguf --device cuda --port 18080 --kv-memory 8192 --token-budget $B > $OUT/serve-$B.log 2>&1 &
  for i in $(seq 90); do curl -sf localhost:18080/health >/dev/null && break; sleep 1; done
  run 256 $((400 + B % 1000)) b$B; run 256 $((500 + B % 1000)) b$B
  [ $B = 512 ] && { run 64 601 b$B; run 1 602 b$B; }
  kill %1; wait; echo "errors in the log: $(grep -c '"level":"error"' $OUT/serve-$B.log)"
done
el done
