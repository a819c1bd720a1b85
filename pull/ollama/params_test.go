package ollama

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"ringlm/sample"
)

func modelWithParams(t *testing.T, params string) *Model {
	t.Helper()
	m := &Model{Name: Name{Host: DefaultHost, Namespace: DefaultNamespace, Model: "m", Tag: DefaultTag}}
	if err := json.Unmarshal([]byte(params), &m.Params); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSampleParams(t *testing.T) {
	for _, c := range []struct {
		params string
		want   func(p *sample.Params)
	}{
		// llama3.2's params layer: stop strings only.
		{`{"stop":["<|start_header_id|>","<|end_header_id|>","<|eot_id|>"]}`, func(p *sample.Params) {
			p.StopStrings = []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}
		}},
		// qwen2.5-coder's kind: sampling defaults.
		{`{"temperature":0.7,"top_k":20,"top_p":0.8,"repeat_penalty":1.05,"stop":["<|im_end|>"]}`, func(p *sample.Params) {
			p.Temperature, p.TopK, p.TopP, p.RepeatPenalty = 0.7, 20, 0.8, 1.05
			p.StopStrings = []string{"<|im_end|>"}
		}},
		{`{"min_p":0.05,"repeat_last_n":-1,"presence_penalty":1.5,"frequency_penalty":-0.5,"seed":42,"num_predict":128}`, func(p *sample.Params) {
			p.MinP, p.RepeatLastN, p.PresencePenalty, p.FrequencyPenalty, p.Seed, p.MaxTokens = 0.05, -1, 1.5, -0.5, 42, 128
		}},
		// Ollama's "random seed" and "no limit" keep ringlm's meanings.
		{`{"seed":-1,"num_predict":-1}`, func(p *sample.Params) {}},
		{`{"num_predict":-2,"top_k":-5}`, func(p *sample.Params) {}},
		// One stop string, and options that are not sampling, or that
		// ringlm's sampler does not have.
		{`{"stop":"</s>","num_ctx":8192,"mirostat":2,"num_gpu":99}`, func(p *sample.Params) { p.StopStrings = []string{"</s>"} }},
		{`{}`, func(p *sample.Params) {}},
	} {
		m := modelWithParams(t, c.params)
		got, err := m.SampleParams(sample.Defaults())
		if err != nil {
			t.Errorf("%s: %v", c.params, err)
			continue
		}
		want := sample.Defaults()
		c.want(&want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.params, got, want)
		}
		if err := got.Validate(1000); err != nil {
			t.Errorf("%s: the result does not validate: %v", c.params, err)
		}
	}
}

func TestSampleParamsErrors(t *testing.T) {
	for _, c := range []struct{ params, want string }{
		{`{"temperature":"hot"}`, `parameter temperature is "hot", want a number`},
		{`{"top_k":2.5}`, "parameter top_k is 2.5, want a whole number"},
		{`{"seed":1e300}`, "parameter seed is 1e+300, want a whole number"},
		{`{"stop":[1,2]}`, "parameter stop is [1,2], want a list of strings"},
		{`{"stop":{"a":"b"}}`, "parameter stop is"},
		{`{"repeat_last_n":null}`, "parameter repeat_last_n is null"},
	} {
		m := modelWithParams(t, c.params)
		_, err := m.SampleParams(sample.Defaults())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), m.Name.String()) {
			t.Errorf("%s: got %v, want an error naming the model and %q", c.params, err, c.want)
			continue
		}
		checkOneLine(t, err)
	}
}

func TestNumCtx(t *testing.T) {
	for _, c := range []struct {
		params string
		want   int
		err    string
	}{
		{`{"num_ctx":4096}`, 4096, ""},
		{`{"temperature":1}`, 0, ""},
		{`{"num_ctx":0}`, 0, "want 1 to"},
		{`{"num_ctx":-1}`, 0, "want 1 to"},
		{`{"num_ctx":1e12}`, 0, "want 1 to"},
		{`{"num_ctx":"4k"}`, 0, "want a number"},
	} {
		got, err := modelWithParams(t, c.params).NumCtx()
		if c.err == "" && (err != nil || got != c.want) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: NumCtx() = %d, %v; want %d, %q", c.params, got, err, c.want, c.err)
		}
	}
}
