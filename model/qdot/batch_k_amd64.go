//go:build amd64 && !purego

package qdot

func runQ5_0(p *byte, ldp uintptr, nb int, bt *Batch, out *float32, ldo uintptr, mask uint16, tmp *float32) {
	q50BatchVNNI(p, ldp, nb, &bt.q[0], &bt.d[0], out, ldo, mask, tmp)
}

func runQ4_0(p *byte, ldp uintptr, nb int, bt *Batch, out *float32, ldo uintptr, mask uint16, tmp *float32) {
	q40BatchVNNI(p, ldp, nb, &bt.q[0], &bt.d[0], out, ldo, mask)
}

func runK4(p *byte, ldp uintptr, nb int, bt *Batch, out *float32, ldo uintptr, mask uint16, tmp *float32) {
	kBatchVNNI(p, ldp, nb, &bt.k.q[0], &bt.k.d[0], &bt.k.bs[0], out, ldo, mask, tmp)
}

func runQ6_K(p *byte, ldp uintptr, nb int, bt *Batch, out *float32, ldo uintptr, mask uint16, tmp *float32) {
	kBatchVNNI(p, ldp, nb, &bt.k.q[0], &bt.k.d[0], nil, out, ldo, mask, tmp)
}

// q50BatchVNNI: three prepared Q5_0 rows at p, p+ldp, p+2·ldp of nb
// blocks against a Q8_0 batch; tmp holds 2·3·8·16 floats.
//
//go:noescape
func q50BatchVNNI(p *byte, ldp uintptr, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, mask uint16, tmp *float32)

// q40BatchVNNI: twelve prepared Q4_0 rows against a Q8_0 batch.
//
//go:noescape
func q40BatchVNNI(p *byte, ldp uintptr, nb int, xq *byte, xd *float32, out *float32, ldo uintptr, mask uint16)

// kBatchVNNI: twelve prepared Q4_K or Q5_K rows against a Q8_K batch, or
// Q6_K rows where xs (the bsum pairs, for the mins) is nil; tmp holds
// 9·12·16 floats.
//
//go:noescape
func kBatchVNNI(p *byte, ldp uintptr, nb int, xq *byte, xd *float32, xs *int32, out *float32, ldo uintptr, mask uint16, tmp *float32)

// The preparations of batch_k.go: nb blocks of a row at w into p.

//go:noescape
func q40PrepVNNI(p *byte, w *byte, nb int)

//go:noescape
func q50PrepVNNI(p *byte, w *byte, nb int)

//go:noescape
func q4kPrepVNNI(p *byte, w *byte, nb int)

//go:noescape
func q5kPrepVNNI(p *byte, w *byte, nb int)

//go:noescape
func q6kPrepVNNI(p *byte, w *byte, nb int)

func prepQ4_0(p, w []byte, nb int) { q40PrepVNNI(&p[0], &w[0], nb) }
func prepQ5_0(p, w []byte, nb int) { q50PrepVNNI(&p[0], &w[0], nb) }
func prepQ4_K(p, w []byte, nb int) { q4kPrepVNNI(&p[0], &w[0], nb) }
func prepQ5_K(p, w []byte, nb int) { q5kPrepVNNI(&p[0], &w[0], nb) }
func prepQ6_K(p, w []byte, nb int) { q6kPrepVNNI(&p[0], &w[0], nb) }
