package chat

import (
	"errors"
	"testing"
)

var conv = []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "2+2?"}}

func TestRender(t *testing.T) {
	cases := map[Format]string{
		ChatML: "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n",
		Llama3: "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
		Phi3:    "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\n2+2?<|end|>\n<|assistant|>\n",
		Llama2:  "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello!</s><s>[INST] 2+2? [/INST]",
		Mistral: "[INST] Be brief.\n\nHi [/INST] Hello!</s><s>[INST] 2+2? [/INST]",
	}
	for f, want := range cases {
		got, err := Template{Format: f}.Render(conv, true)
		if err != nil || got != want {
			t.Errorf("%s:\n got %q\nwant %q (%v)", f, got, want, err)
		}
	}
}

func TestDetect(t *testing.T) {
	cases := map[string]Format{
		"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}": ChatML,
		"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}":              Llama3,
		"{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}":                                          Phi3,
		"{{ bos_token + '[INST] ' + '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}":                                                       Llama2,
		"{{ '[INST] ' + message['content'] + ' [/INST]' }}":                                                                               Mistral,
	}
	for src, want := range cases {
		got, err := Detect(src)
		if err != nil || got.Format != want {
			t.Errorf("Detect(%.40q) = %v, %v; want %s", src, got, err, want)
		}
	}
	qwen25 := "{%- if messages[0]['role'] == 'system' %}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
	tm, err := Detect(qwen25)
	if err != nil || tm.DefaultSystem == "" {
		t.Fatalf("qwen2.5 default system not detected: %+v %v", tm, err)
	}
	got, _ := tm.Render([]Message{{Role: "user", Content: "Hi"}}, true)
	if want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; got != want {
		t.Fatalf("qwen2.5 render %q", got)
	}
	for _, bad := range []string{"", "{{ messages }}"} {
		if _, err := Detect(bad); !errors.Is(err, ErrUnknownTemplate) {
			t.Errorf("Detect(%q): %v", bad, err)
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := (Template{Format: ChatML}).Render([]Message{{Role: "tool", Content: "x"}}, true); err == nil {
		t.Error("unknown role accepted")
	}
	if _, err := ParseFormat("alpaca"); err == nil {
		t.Error("unknown format accepted")
	}
	if f, err := ParseFormat("ChatML"); err != nil || f != ChatML {
		t.Error("format names are case-insensitive")
	}
}
