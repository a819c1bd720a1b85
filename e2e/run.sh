#!/usr/bin/env bash
# Starts `ringlm serve` on a free loopback port with a tiny synthetic model,
# runs the node tests against it (openai client + curl), then stops it with
# SIGTERM and checks that it exits 0. `make e2e` builds what this needs.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/ringlm}
MODEL=${E2E_MODEL:-bin/default-tiny-llama.gguf}
KEY=${E2E_API_KEY:-e2e-secret}
LOG=$(mktemp -t ringlm-e2e-XXXXXX.log)

# No --chat-template: the synthetic model carries Mistral's vocabulary but
# no template of its own, so the chat tests go through the ChatML fallback
# that a new user's model without a template meets.
"$BIN" serve -m "$MODEL" --host 127.0.0.1 --port 0 --api-key "$KEY" \
  --slots 16 --kv-blocks 2048 --log-format json --shutdown-timeout 10s 2>"$LOG" &
PID=$!
cleanup() {
  kill "$PID" 2>/dev/null || true
  rm -f "$LOG"
}
trap cleanup EXIT
fail() {
  echo "e2e: $*" >&2
  echo "--- server log (tail) ---" >&2
  tail -n 40 "$LOG" >&2
  exit 1
}

ADDR=""
for _ in $(seq 1 300); do
  ADDR=$(grep -o '"addr":"[^"]*"' "$LOG" | head -n 1 | cut -d'"' -f4 || true)
  [ -n "$ADDR" ] && break
  kill -0 "$PID" 2>/dev/null || fail "the server exited before listening"
  sleep 0.1
done
[ -n "$ADDR" ] || fail "no listening address in the log"
URL="http://$ADDR"
for _ in $(seq 1 600); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true)
  [ "$code" = 200 ] && break
  kill -0 "$PID" 2>/dev/null || fail "the server exited while loading"
  sleep 0.1
done
[ "$code" = 200 ] || fail "/health never answered 200 (last: $code)"
echo "e2e: ringlm serve ready at $URL (pid $PID)"

status=0
RINGLM_URL="$URL" RINGLM_API_KEY="$KEY" node --test --test-concurrency=1 e2e/ || status=$?

kill -TERM "$PID"
exit_code=0
wait "$PID" || exit_code=$?
trap - EXIT
if [ "$exit_code" -ne 0 ]; then
  fail "ringlm serve exited $exit_code after SIGTERM (want 0)"
fi
grep -q '"message":"stopped"' "$LOG" || fail "no clean stop in the log"
rm -f "$LOG"
echo "e2e: server stopped cleanly (exit 0)"
exit "$status"
