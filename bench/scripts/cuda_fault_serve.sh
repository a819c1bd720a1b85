#!/bin/bash
# Device fault through `ringlm serve`: a trap fails the request, /health
# says device_failed, the process exits non-zero; a fresh process serves.
set -u
B=${RINGLM:-./bin/ringlm}
$B synth --preset tiny --type f16 -o /tmp/tiny.gguf >/dev/null
post() { curl -s -m 20 -o /tmp/body -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "{\"model\":\"$MODEL\",\"prompt\":\"hello there\",\"max_tokens\":40,\"temperature\":0}" http://127.0.0.1:18080/v1/completions; }
waitup() { for i in $(seq 100); do curl -s -m 1 http://127.0.0.1:18080/health | grep -q '"ok"' && return 0; sleep 0.2; done; return 1; }
RINGLM_CUDA_TRAP_STEP=3 $B serve -m /tmp/tiny.gguf --device cuda --port 18080 --log-format json > /tmp/serve1.log 2>&1 &
P=$!
waitup || { echo "first server never ready"; cat /tmp/serve1.log; exit 1; }
MODEL=$(curl -s http://127.0.0.1:18080/v1/models | grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4)
echo "model: $MODEL"
echo "first server: completion -> HTTP $(post)"; head -c 300 /tmp/body; echo
echo "health: $(curl -s -m 2 http://127.0.0.1:18080/health)"
for i in $(seq 150); do kill -0 $P 2>/dev/null || break; sleep 0.2; done
kill -0 $P 2>/dev/null && { echo "first server still running"; kill -9 $P; }
wait $P; echo "first server exit code: $?"
grep -o '"message":"[^"]*device failed[^"]*"\|the device failed[^"]*' /tmp/serve1.log | head -3
$B serve -m /tmp/tiny.gguf --device cuda --port 18080 > /tmp/serve2.log 2>&1 &
P=$!
waitup || { echo "second server never ready"; cat /tmp/serve2.log; exit 1; }
echo "fresh server: completion -> HTTP $(post)"; head -c 200 /tmp/body; echo
kill -TERM $P; wait $P; echo "fresh server exit code after SIGTERM: $?"
