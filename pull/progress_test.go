package pull

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestProgressJSONLines(t *testing.T) {
	events := []Event{
		{Status: "pulling 0123456789ab", Digest: "sha256:0123456789ab", Total: 100, Completed: 50},
		{Status: "verifying sha256 digest", Digest: "sha256:0123456789ab"},
		{Status: "success"},
	}
	for _, forced := range []bool{true, false} { // a buffer is no terminal: JSON either way
		var buf bytes.Buffer
		show := NewProgress(&buf, forced)
		for _, e := range events {
			show(e)
		}
		sc := bufio.NewScanner(&buf)
		for i := 0; sc.Scan(); i++ {
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e != events[i] {
				t.Errorf("line %d: %s (%v), want %+v", i, sc.Text(), err, events[i])
			}
		}
	}
	var buf bytes.Buffer
	NewProgress(&buf, true)(events[2])
	if got := buf.String(); got != `{"status":"success"}`+"\n" {
		t.Errorf("success is %q", got)
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(0, 0)
	b := newBar(&buf, func() time.Time { return clock })
	d := "sha256:0123456789abcdef"
	st := "pulling 0123456789ab"
	b.show(Event{Status: st, Digest: d, Total: 10_000_000, Completed: 0})
	clock = clock.Add(time.Second)
	b.show(Event{Status: st, Digest: d, Total: 10_000_000, Completed: 2_000_000})
	// Too soon after the last draw: kept, drawn when the bar ends.
	clock = clock.Add(10 * time.Millisecond)
	b.show(Event{Status: st, Digest: d, Total: 10_000_000, Completed: 2_010_000})
	clock = clock.Add(990 * time.Millisecond)
	b.show(Event{Status: st, Digest: d, Total: 10_000_000, Completed: 4_000_000})
	clock = clock.Add(3 * time.Second)
	b.show(Event{Status: st, Digest: d, Total: 10_000_000, Completed: 10_000_000})
	b.show(Event{Status: "verifying sha256 digest", Digest: d})
	b.show(Event{Status: "success"})

	draws := strings.Split(buf.String(), "\r")
	for _, want := range []string{
		"pulling 0123456789ab:  20% ▕█████                    ▏ 2.0 MB/10 MB  2.0 MB/s  4s",
		"pulling 0123456789ab:  40% ▕██████████               ▏ 4.0 MB/10 MB  2.0 MB/s  3s",
		"pulling 0123456789ab: 100% ▕█████████████████████████▏ 10 MB",
	} {
		found := false
		for _, d := range draws {
			found = found || strings.HasPrefix(d, want)
		}
		if !found {
			t.Errorf("no draw %q in %q", want, buf.String())
		}
	}
	// 0%, 20%, 40%, 100%, and 100% again as the bar ends: not the event
	// 10 ms after a draw.
	if n := strings.Count(buf.String(), "\r"); n != 5 {
		t.Errorf("%d draws, want 5: %q", n, buf.String())
	}
	if !strings.HasSuffix(buf.String(), " 10 MB\nverifying sha256 digest\nsuccess\n") {
		t.Errorf("the bar does not end its line before the other statuses: %q", buf.String())
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 999: "999 B", 1000: "1.0 KB", 1500: "1.5 KB", 45_000_000: "45 MB",
		4_700_000_000: "4.7 GB", 999_960: "1.0 MB", 1 << 62: "4.6 EB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
