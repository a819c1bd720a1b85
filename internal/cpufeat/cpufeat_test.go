package cpufeat

import "testing"

// TestCapped: RINGLM_CPU lowers the level, never raises it, and an
// unknown value leaves it.
func TestCapped(t *testing.T) {
	for _, c := range []struct {
		have Level
		env  string
		want Level
	}{
		{LevelAVX512, "", LevelAVX512},
		{LevelAVX512, "avx2", LevelAVX2},
		{LevelAVX512, "go", Go},
		{LevelAVX2, "avx512", LevelAVX2},
		{Go, "avx2", Go},
		{LevelAVX512, "sse", LevelAVX512},
	} {
		if got := capped(c.have, c.env); got != c.want {
			t.Errorf("capped(%s, %q) = %s, want %s", c.have, c.env, got, c.want)
		}
	}
	if Use > Detected || AVX2 != (Use >= LevelAVX2) || (VNNI && Use < LevelAVX512) {
		t.Errorf("Detected %s, Use %s, AVX2 %v, VNNI %v", Detected, Use, AVX2, VNNI)
	}
	t.Logf("detected %s, using %s, VNNI %v", Detected, Use, VNNI)
}
