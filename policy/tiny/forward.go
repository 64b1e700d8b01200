package tiny

// span is one sequence's rows in a packed batch.
type span struct{ start, n int }

type layerActs struct {
	h1, rstd1    []float32 // input_layernorm
	q, k, v, att []float32 // q and k after the rotary embedding
	probs        []float32 // rows × heads × ctx attention weights
	x2           []float32 // residual stream after attention
	h2, rstd2    []float32 // post_attention_layernorm
	g, u, m      []float32 // gate_proj, up_proj, silu(g)·u: rows × hidden
}

// acts holds a packed batch — the rows of several sequences one after the
// other — and every activation of its forward pass, which backward reads.
type acts struct {
	cfg    Config
	rows   int
	tokens []int32
	pos    []int32 // position of each row in its sequence
	start  []int32 // first row of each row's sequence (packed mode)
	slot   []int32 // KV-cache slot of each row (decode mode)
	spans  []span
	x      [][]float32 // Layers+1 residual streams
	ls     []layerActs
	hf     []float32
	rstdf  []float32
	logits []float32
	logp   []float32 // log-softmax of logits
	ent    []float32 // entropy of each row's distribution
}

// first returns a view of a's first rows, whole sequences, for a
// backward pass that stops before the rest: the rows after them give
// the gradient nothing (packLive put them there). Every term the pass
// leaves out is a product with a zero, and every sum over rows adds its
// terms in row order, skipping none but those (the kernels' contract,
// gemm.go), so the gradient keeps every bit of the pass over all rows.
func (a *acts) first(rows int) *acts {
	if rows == a.rows {
		return a
	}
	v := *a
	v.rows = rows
	v.spans = nil
	for _, s := range a.spans {
		if s.start+s.n <= rows {
			v.spans = append(v.spans, s)
		}
	}
	return &v
}

func newActs(cfg Config) *acts {
	return &acts{cfg: cfg, x: make([][]float32, cfg.Layers+1), ls: make([]layerActs, cfg.Layers)}
}

func grow(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n, n+n/4)
}

func grow32(s []int32, n int) []int32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]int32, n, n+n/4)
}

// reset sizes the batch for rows rows, keeping its buffers.
func (a *acts) reset(rows int) {
	c := a.cfg
	d, A, H, V, F := c.Dim, c.attnWidth(), c.Heads, c.VocabSize(), c.Hidden
	a.rows = rows
	a.tokens = grow32(a.tokens, rows)
	a.pos = grow32(a.pos, rows)
	a.start = grow32(a.start, rows)
	a.slot = grow32(a.slot, rows)
	a.spans = a.spans[:0]
	for i := range a.x {
		a.x[i] = grow(a.x[i], rows*d)
	}
	for i := range a.ls {
		l := &a.ls[i]
		l.h1, l.rstd1 = grow(l.h1, rows*d), grow(l.rstd1, rows)
		l.q, l.k, l.v, l.att = grow(l.q, rows*A), grow(l.k, rows*A), grow(l.v, rows*A), grow(l.att, rows*A)
		l.probs = grow(l.probs, rows*H*c.Context)
		l.x2 = grow(l.x2, rows*d)
		l.h2, l.rstd2 = grow(l.h2, rows*d), grow(l.rstd2, rows)
		l.g, l.u, l.m = grow(l.g, rows*F), grow(l.u, rows*F), grow(l.m, rows*F)
	}
	a.hf, a.rstdf = grow(a.hf, rows*d), grow(a.rstdf, rows)
	a.logits, a.logp, a.ent = grow(a.logits, rows*V), grow(a.logp, rows*V), grow(a.ent, rows)
}

// addSequence appends a sequence's input tokens (BOS first) to the packed
// batch, which must have been reset to hold them.
func (a *acts) addSequence(at int, toks []int32) {
	a.spans = append(a.spans, span{at, len(toks)})
	for i, t := range toks {
		a.tokens[at+i] = t
		a.pos[at+i] = int32(i)
		a.start[at+i] = int32(at)
	}
}

// kvCache holds the keys (rotated) and values of sequences being sampled:
// per layer, slots × Context rows of Heads·HeadDim.
type kvCache struct {
	k, v [][]float32
}

func newKVCache(c Config, slots int) *kvCache {
	kv := &kvCache{k: make([][]float32, c.Layers), v: make([][]float32, c.Layers)}
	for l := range kv.k {
		kv.k[l] = make([]float32, slots*c.Context*c.attnWidth())
		kv.v[l] = make([]float32, slots*c.Context*c.attnWidth())
	}
	return kv
}

// forward runs the model over a's rows. Without a cache the rows are packed
// sequences, each attending over its own earlier rows; with one, each row
// is the next token of the sequence in cache slot a.slot[r] at position
// a.pos[r]: its keys and values are stored there and it attends over the
// slot's positions 0..pos. Both modes compute a row with the same
// operations, so they agree bit for bit.
//
// Each block is Llama's:
//
//	h = x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n)))   n = rmsnorm(x)
//	x = h + down_proj(silu(gate_proj(n')) · up_proj(n'))                     n' = rmsnorm(h)
func (w *weights) forward(a *acts, kv *kvCache) {
	c := w.cfg
	d, A, H, ctx, V, F := c.Dim, c.attnWidth(), c.Heads, c.Context, c.VocabSize(), c.Hidden
	rope := w.rope
	rows := a.rows
	x := a.x[0]
	for r := 0; r < rows; r++ {
		t := int(a.tokens[r])
		copy(x[r*d:(r+1)*d], w.tok[t*d:(t+1)*d])
	}
	for l := range w.blocks {
		b, la := &w.blocks[l], &a.ls[l]
		rmsNorm(rows, d, x, b.attnNorm, la.h1, la.rstd1)
		linearForward(rows, &b.q, la.h1, la.q)
		linearForward(rows, &b.k, la.h1, la.k)
		linearForward(rows, &b.v, la.h1, la.v)
		for r := 0; r < rows; r++ {
			p := int(a.pos[r])
			rope.rotate(la.q[r*A:(r+1)*A], p, H, false)
			rope.rotate(la.k[r*A:(r+1)*A], p, H, false)
			var K, Vs []float32
			if kv == nil {
				s := int(a.start[r]) * A
				K, Vs = la.k[s:], la.v[s:]
			} else {
				s := int(a.slot[r]) * ctx * A
				K, Vs = kv.k[l][s:], kv.v[l][s:]
				copy(K[p*A:(p+1)*A], la.k[r*A:(r+1)*A])
				copy(Vs[p*A:(p+1)*A], la.v[r*A:(r+1)*A])
			}
			attendRow(la.q[r*A:(r+1)*A], K, Vs, p+1, A, H, ctx, la.att[r*A:(r+1)*A], la.probs[r*H*ctx:(r+1)*H*ctx])
		}
		linearForward(rows, &b.o, la.att, la.x2)
		for i, v := range x[:rows*d] {
			la.x2[i] += v
		}
		rmsNorm(rows, d, la.x2, b.mlpNorm, la.h2, la.rstd2)
		linearForward(rows, &b.gate, la.h2, la.g)
		linearForward(rows, &b.up, la.h2, la.u)
		for i, g := range la.g[:rows*F] {
			la.m[i] = silu(g) * la.u[i]
		}
		xn := a.x[l+1]
		linearForward(rows, &b.down, la.m, xn)
		for i, v := range la.x2[:rows*d] {
			xn[i] += v
		}
		x = xn
	}
	rmsNorm(rows, d, x, w.norm, a.hf, a.rstdf)
	linearForward(rows, &w.head, a.hf, a.logits)
	for r := 0; r < rows; r++ {
		a.ent[r] = logSoftmax(a.logits[r*V:(r+1)*V], a.logp[r*V:(r+1)*V])
	}
}

// gradActs holds the gradient buffers of a backward pass.
type gradActs struct {
	dx, dh, datt, dq, dk, dv, dg, du []float32
}

func (g *gradActs) reset(c Config, rows int) {
	d, A, F := c.Dim, c.attnWidth(), c.Hidden
	g.dx, g.dh, g.datt = grow(g.dx, rows*d), grow(g.dh, rows*d), grow(g.datt, rows*A)
	g.dq, g.dk, g.dv = grow(g.dq, rows*A), grow(g.dk, rows*A), grow(g.dv, rows*A)
	g.dg, g.du = grow(g.dg, rows*F), grow(g.du, rows*F)
}

// backward back-propagates dlogits (rows × V) through the packed forward
// pass recorded in a, adding parameter gradients to g. With full, every
// parameter gets its gradient; otherwise only the adaptable linear
// layers' weights do (what LoRA needs).
func (w *weights) backward(a *acts, ga *gradActs, g *weights, full bool, dlogits []float32) {
	rows := a.rows
	ga.reset(w.cfg, rows)
	var gl *linear
	if full {
		gl = &g.head
	}
	linearBackward(rows, &w.head, gl, a.hf, dlogits, ga.dh, false)
	w.backwardFromNorm(a, ga, g, full)
}

// backwardFromNorm back-propagates ga.dh, the gradient at the final
// norm's output (ga reset for a's rows), through the rest of the packed
// forward pass recorded in a, adding parameter gradients to g as
// backward does.
func (w *weights) backwardFromNorm(a *acts, ga *gradActs, g *weights, full bool) {
	c := w.cfg
	d, A, H, ctx, F := c.Dim, c.attnWidth(), c.Heads, c.Context, c.Hidden
	rows := a.rows
	dx, dh := ga.dx, ga.dh
	clear(dx)
	var dn []float32
	if full {
		dn = g.norm
	}
	rmsNormBackward(rows, d, a.x[c.Layers], w.norm, a.rstdf, dh, dx, dn)
	for l := c.Layers - 1; l >= 0; l-- {
		b, la, gb := &w.blocks[l], &a.ls[l], &g.blocks[l]
		// x[l+1] = x2 + down(silu(gate(n)) · up(n)), n = norm(x2)
		linearBackward(rows, &b.down, &gb.down, la.m, dx, ga.du, false)
		for i, dm := range ga.du[:rows*F] {
			gv := la.g[i]
			s := sigmoid(gv)
			ga.du[i] = dm * gv * s
			ga.dg[i] = dm * la.u[i] * s * (1 + gv*(1-s))
		}
		linearBackward(rows, &b.gate, &gb.gate, la.h2, ga.dg, dh, false)
		linearBackward(rows, &b.up, &gb.up, la.h2, ga.du, dh, true)
		dn = nil
		if full {
			dn = gb.mlpNorm
		}
		rmsNormBackward(rows, d, la.x2, b.mlpNorm, la.rstd2, dh, dx, dn)
		// x2 = x[l] + o(attention(rope(q), rope(k), v)(norm(x[l])))
		linearBackward(rows, &b.o, &gb.o, la.att, dx, ga.datt, false)
		clear(ga.dq)
		clear(ga.dk)
		clear(ga.dv)
		for _, s := range a.spans {
			o := s.start * A
			attendBackward(s.n, A, H, ctx, la.q[o:], la.k[o:], la.v[o:], la.probs[s.start*H*ctx:],
				ga.datt[o:], ga.dq[o:], ga.dk[o:], ga.dv[o:])
		}
		for r := 0; r < rows; r++ {
			p := int(a.pos[r])
			w.rope.rotate(ga.dq[r*A:(r+1)*A], p, H, true)
			w.rope.rotate(ga.dk[r*A:(r+1)*A], p, H, true)
		}
		linearBackward(rows, &b.q, &gb.q, la.h1, ga.dq, dh, false)
		linearBackward(rows, &b.k, &gb.k, la.h1, ga.dk, dh, true)
		linearBackward(rows, &b.v, &gb.v, la.h1, ga.dv, dh, true)
		if !full && l == 0 {
			break // nothing below needs a gradient
		}
		dn = nil
		if full {
			dn = gb.attnNorm
		}
		rmsNormBackward(rows, d, a.x[l], b.attnNorm, la.rstd1, dh, dx, dn)
	}
	if !full {
		return
	}
	for r := 0; r < rows; r++ {
		t := int(a.tokens[r])
		dr, gt := dx[r*d:(r+1)*d], g.tok[t*d:(t+1)*d]
		for i, v := range dr {
			gt[i] += v
		}
	}
}
