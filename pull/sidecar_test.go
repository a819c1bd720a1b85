package pull

import (
	"slices"
	"strings"
	"testing"
)

func TestSpansAdd(t *testing.T) {
	for _, tc := range []struct {
		add  []span
		want spans
	}{
		{[]span{{0, 10}, {10, 20}}, spans{{0, 20}}},
		{[]span{{10, 20}, {0, 5}}, spans{{0, 5}, {10, 20}}},
		{[]span{{0, 5}, {10, 20}, {4, 11}}, spans{{0, 20}}},
		{[]span{{0, 5}, {10, 20}, {30, 40}, {5, 30}}, spans{{0, 40}}},
		{[]span{{10, 20}, {12, 15}}, spans{{10, 20}}},
		{[]span{{10, 20}, {5, 5}}, spans{{10, 20}}},
		{[]span{{30, 40}, {10, 20}, {21, 29}}, spans{{10, 20}, {21, 29}, {30, 40}}},
	} {
		var s spans
		for _, a := range tc.add {
			s = s.add(a)
		}
		if !slices.Equal(s, tc.want) {
			t.Errorf("adding %v: %v, want %v", tc.add, s, tc.want)
		}
	}
}

func TestSpansMissing(t *testing.T) {
	s := spans{{10, 20}, {30, 40}}
	if got, want := s.missing(50), []span{{0, 10}, {20, 30}, {40, 50}}; !slices.Equal(got, want) {
		t.Errorf("missing %v, want %v", got, want)
	}
	if got := (spans{{0, 50}}).missing(50); len(got) != 0 {
		t.Errorf("a complete set misses %v", got)
	}
	if got, want := spans(nil).missing(7), []span{{0, 7}}; !slices.Equal(got, want) {
		t.Errorf("an empty set misses %v, want %v", got, want)
	}
}

func TestPlanCutsAtPartBoundaries(t *testing.T) {
	tr := &transfer{b: Blob{Size: 400}, o: Options{Parts: 4, SplitAt: 100}}
	tr.done = spans{{0, 50}, {100, 130}, {300, 400}}
	if got, want := tr.plan(), []span{{50, 100}, {130, 200}, {200, 300}}; !slices.Equal(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	tr.o.SplitAt = 1000
	if got, want := tr.plan(), []span{{50, 100}, {130, 300}}; !slices.Equal(got, want) {
		t.Errorf("plan below SplitAt %v, want %v", got, want)
	}
}

func FuzzParseSidecar(f *testing.F) {
	sha := strings.Repeat("a", 64)
	f.Add([]byte(`{"sha256":"`+sha+`","size":100,"done":[[0,10],[20,30]]}`), int64(100), int64(30))
	f.Add([]byte(`{"sha256":"`+sha+`","size":-1,"done":[[0,10]]}`), int64(-1), int64(10))
	f.Add([]byte(`{"sha256":"`+sha+`","size":100,"done":[[20,30],[0,10]]}`), int64(100), int64(100))
	f.Add([]byte(`{"done":[[9223372036854775807,-9223372036854775808]]}`), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, size, fileLen int64) {
		s, err := parseSidecar(data, sha, size, fileLen)
		if err != nil {
			return
		}
		for i, x := range s {
			if x.Start < 0 || x.End <= x.Start || x.End > fileLen || (size >= 0 && x.End > size) || (i > 0 && x.Start <= s[i-1].End) {
				t.Fatalf("accepted %v", s)
			}
		}
	})
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 5-9/*", "bytes 9-5/10", "bytes 0-99/99", "bytes -1-2/3", "bytes 99999999999999999999-1/2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		first, last, total, err := parseContentRange(h)
		if err != nil {
			return
		}
		if first < 0 || last < first || (total != -1 && last >= total) {
			t.Fatalf("%q: accepted %d-%d/%d", h, first, last, total)
		}
	})
}
