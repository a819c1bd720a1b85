package pulltest

import (
	"io"
	"net/http"
	"testing"
)

func get(t *testing.T, url, rng string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Range"), string(b)
}

func TestServerRanges(t *testing.T) {
	s := NewServer(t)
	s.Add("/f", []byte("0123456789"))
	for _, tc := range []struct {
		rng, cr, body string
		status        int
	}{
		{"", "", "0123456789", 200},
		{"bytes=2-4", "bytes 2-4/10", "234", 206},
		{"bytes=7-", "bytes 7-9/10", "789", 206},
		{"bytes=8-99", "bytes 8-9/10", "89", 206},
		{"bytes=-3", "bytes 7-9/10", "789", 206},
		{"bytes=10-", "bytes */10", "", 416},
		{"bytes=0-1,3-4", "bytes */10", "", 416},
	} {
		status, cr, body := get(t, s.URL("/f"), tc.rng)
		if status != tc.status || cr != tc.cr || body != tc.body {
			t.Errorf("Range %q: %d %q %q; want %d %q %q", tc.rng, status, cr, body, tc.status, tc.cr, tc.body)
		}
	}
	if s.Served() != 10+3+3+2+3 {
		t.Errorf("served %d", s.Served())
	}
}

func TestServerFaults(t *testing.T) {
	s := NewServer(t)
	s.Add("/f", []byte("0123456789"))
	s.Redirect("/old", "/f")
	s.Inject(Fault{Match: RangeFrom(5), Status: http.StatusServiceUnavailable, Times: 1})
	s.Corrupt("/f", 6)
	if status, _, _ := get(t, s.URL("/f"), "bytes=5-"); status != 503 {
		t.Errorf("the fault did not apply: %d", status)
	}
	if _, _, body := get(t, s.URL("/old"), "bytes=5-"); body != "5\xc9789" {
		t.Errorf("after the fault's one time, through the redirect: %q", body)
	}
	s.Clear()
	s.IgnoreRange(true)
	if status, _, body := get(t, s.URL("/f"), "bytes=5-"); status != 200 || body != "0123456789" {
		t.Errorf("Range ignored: %d %q", status, body)
	}
	if status, _, _ := get(t, s.URL("/nope"), ""); status != 404 {
		t.Errorf("a missing file: %d", status)
	}
	want := []string{"/f", "/old", "/f", "/f", "/nope"}
	for i, r := range s.Requests() {
		if r.Path != want[i] {
			t.Errorf("request %d: %+v", i, r)
		}
	}
}
