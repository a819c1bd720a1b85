//go:build amd64 && !purego

package cpufeat

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

var hasVNNI bool

// detect checks the CPU's extensions and that the OS saves the state
// they use (OSXSAVE, then XCR0: bits 1-2 the YMM state, 5-7 the opmask
// and ZMM state).
func detect() Level {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return Go
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
		f16c    = 1 << 29
	)
	if ecx1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return Go
	}
	xcr0, _ := xgetbv()
	if xcr0&6 != 6 {
		return Go
	}
	_, ebx7, ecx7, _ := cpuid(7, 0)
	if ebx7&(1<<5) == 0 { // AVX2
		return Go
	}
	const (
		avx512f  = 1 << 16
		avx512dq = 1 << 17
		avx512bw = 1 << 30
		avx512vl = 1 << 31
		all      = avx512f | avx512dq | avx512bw | avx512vl
	)
	if ebx7&all != all || xcr0&0xe0 != 0xe0 {
		return LevelAVX2
	}
	hasVNNI = ecx7&(1<<11) != 0
	return LevelAVX512
}
