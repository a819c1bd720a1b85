package httpapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"ringlm/engine"
	"ringlm/ringbuf"
	"ringlm/sample"
)

// TestDeviceLimitErrors: a request over a device limit is the client's
// fault: engine.Submit's *LimitError becomes a 400 invalid_request_error
// that names the field and both numbers, and logit_bias over the limit is
// refused before it reaches the engine.
func TestDeviceLimitErrors(t *testing.T) {
	ts := startServer(t, nil)

	// The HTTP API has no stop-token field, so the engine's error is
	// classified directly, as gen.go does with what Submit returns.
	p := sample.Defaults()
	p.StopTokens = make([]int32, ringbuf.MaxStop+44)
	_, err := ts.m.Engine.Submit(context.Background(), engine.Request{Prompt: []int32{1, 2}, Params: p})
	if !errors.Is(err, engine.ErrDeviceLimit) {
		t.Fatalf("Submit with %d stop tokens: %v, want ErrDeviceLimit", len(p.StopTokens), err)
	}
	ae := submitError(err)
	if ae.Status != 400 || ae.Type != "invalid_request_error" || ae.Param != "stop_tokens" ||
		ae.Message != "stop_tokens: 300 stop tokens, the device takes at most 256" {
		t.Errorf("submitError(%v) = %+v", err, ae)
	}

	body := `{"prompt":"x","max_tokens":1,"logit_bias":{`
	for i := range ringbuf.MaxBias + 1 {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`"%d":1`, i)
	}
	body += `}}`
	r := ts.post("/v1/completions", body)
	if r.status != 400 {
		t.Fatalf("%d logit_bias entries: status %d: %s", ringbuf.MaxBias+1, r.status, r.body)
	}
	e, _ := r.json(t)["error"].(map[string]any)
	if str(e["type"]) != "invalid_request_error" || str(e["param"]) != "logit_bias" || !strings.Contains(str(e["message"]), "1024") {
		t.Errorf("%d logit_bias entries: %s", ringbuf.MaxBias+1, r.body)
	}
}
