package tiny

// span is one sequence's rows in a packed batch.
type span struct{ start, n int }

type layerActs struct {
	h1, mean1, rstd1 []float32
	q, k, v, att     []float32
	probs            []float32 // rows × heads × ctx attention weights
	x2               []float32 // residual stream after attention
	h2, mean2, rstd2 []float32
	r                []float32 // ReLU(up_proj), rows × hidden
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
	meanf  []float32
	rstdf  []float32
	logits []float32
	logp   []float32 // log-softmax of logits, PAD and BOS at -Inf
	ent    []float32 // entropy of each row's distribution
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
	d, H, V := c.Dim, c.Heads, c.VocabSize()
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
		l.h1, l.mean1, l.rstd1 = grow(l.h1, rows*d), grow(l.mean1, rows), grow(l.rstd1, rows)
		l.q, l.k, l.v, l.att = grow(l.q, rows*d), grow(l.k, rows*d), grow(l.v, rows*d), grow(l.att, rows*d)
		l.probs = grow(l.probs, rows*H*c.Context)
		l.x2 = grow(l.x2, rows*d)
		l.h2, l.mean2, l.rstd2 = grow(l.h2, rows*d), grow(l.mean2, rows), grow(l.rstd2, rows)
		l.r = grow(l.r, rows*c.Hidden)
	}
	a.hf, a.meanf, a.rstdf = grow(a.hf, rows*d), grow(a.meanf, rows), grow(a.rstdf, rows)
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

// kvCache holds the keys and values of sequences being sampled: per layer,
// slots × Context rows of Dim.
type kvCache struct {
	k, v [][]float32
}

func newKVCache(c Config, slots int) *kvCache {
	kv := &kvCache{k: make([][]float32, c.Layers), v: make([][]float32, c.Layers)}
	for l := range kv.k {
		kv.k[l] = make([]float32, slots*c.Context*c.Dim)
		kv.v[l] = make([]float32, slots*c.Context*c.Dim)
	}
	return kv
}

// forward runs the model over a's rows. Without a cache the rows are packed
// sequences, each attending over its own earlier rows; with one, each row
// is the next token of the sequence in cache slot a.slot[r] at position
// a.pos[r]: its keys and values are stored there and it attends over the
// slot's positions 0..pos. Both modes compute a row with the same
// operations, so they agree bit for bit.
func (w *weights) forward(a *acts, kv *kvCache) {
	c := w.cfg
	d, H, ctx, V := c.Dim, c.Heads, c.Context, c.VocabSize()
	rows := a.rows
	x := a.x[0]
	for r := 0; r < rows; r++ {
		t, p := int(a.tokens[r]), int(a.pos[r])
		xr, te, pe := x[r*d:(r+1)*d], w.tok[t*d:(t+1)*d], w.pos[p*d:(p+1)*d]
		for i := range xr {
			xr[i] = te[i] + pe[i]
		}
	}
	for l := range w.blocks {
		b, la := &w.blocks[l], &a.ls[l]
		layerNorm(rows, d, x, b.ln1g, b.ln1b, la.h1, la.mean1, la.rstd1)
		linearForward(rows, &b.q, la.h1, la.q)
		linearForward(rows, &b.k, la.h1, la.k)
		linearForward(rows, &b.v, la.h1, la.v)
		for r := 0; r < rows; r++ {
			p := int(a.pos[r])
			var K, Vs []float32
			if kv == nil {
				s := int(a.start[r]) * d
				K, Vs = la.k[s:], la.v[s:]
			} else {
				s := int(a.slot[r]) * ctx * d
				K, Vs = kv.k[l][s:], kv.v[l][s:]
				copy(K[p*d:(p+1)*d], la.k[r*d:(r+1)*d])
				copy(Vs[p*d:(p+1)*d], la.v[r*d:(r+1)*d])
			}
			attendRow(la.q[r*d:(r+1)*d], K, Vs, p+1, d, H, ctx, la.att[r*d:(r+1)*d], la.probs[r*H*ctx:(r+1)*H*ctx])
		}
		linearForward(rows, &b.o, la.att, la.x2)
		for i, v := range x[:rows*d] {
			la.x2[i] += v
		}
		layerNorm(rows, d, la.x2, b.ln2g, b.ln2b, la.h2, la.mean2, la.rstd2)
		linearForward(rows, &b.up, la.h2, la.r)
		for i, v := range la.r[:rows*c.Hidden] {
			if v < 0 {
				la.r[i] = 0
			}
		}
		xn := a.x[l+1]
		linearForward(rows, &b.down, la.r, xn)
		for i, v := range la.x2[:rows*d] {
			xn[i] += v
		}
		x = xn
	}
	layerNorm(rows, d, x, w.lnfg, w.lnfb, a.hf, a.meanf, a.rstdf)
	linearForward(rows, &w.head, a.hf, a.logits)
	for r := 0; r < rows; r++ {
		a.ent[r] = logSoftmax(a.logits[r*V:(r+1)*V], a.logp[r*V:(r+1)*V])
	}
}

// gradActs holds the gradient buffers of a backward pass.
type gradActs struct {
	dx, dh, datt, dq, dk, dv, dr []float32
}

func (g *gradActs) reset(c Config, rows int) {
	d := c.Dim
	g.dx, g.dh, g.datt = grow(g.dx, rows*d), grow(g.dh, rows*d), grow(g.datt, rows*d)
	g.dq, g.dk, g.dv = grow(g.dq, rows*d), grow(g.dk, rows*d), grow(g.dv, rows*d)
	g.dr = grow(g.dr, rows*c.Hidden)
}

// backward back-propagates dlogits (rows × V) through the packed forward
// pass recorded in a, adding parameter gradients to g. With full, every
// parameter gets its gradient; otherwise only the adaptable linear
// layers' weights do (what LoRA needs).
func (w *weights) backward(a *acts, ga *gradActs, g *weights, full bool, dlogits []float32) {
	c := w.cfg
	d, H, ctx := c.Dim, c.Heads, c.Context
	rows := a.rows
	ga.reset(c, rows)
	dx, dh := ga.dx, ga.dh
	var gl *linear
	if full {
		gl = &g.head
	}
	linearBackward(rows, &w.head, gl, false, a.hf, dlogits, dh, false)
	clear(dx)
	var dg, db []float32
	if full {
		dg, db = g.lnfg, g.lnfb
	}
	layerNormBackward(rows, d, a.x[c.Layers], w.lnfg, a.meanf, a.rstdf, dh, dx, dg, db)
	for l := c.Layers - 1; l >= 0; l-- {
		b, la, gb := &w.blocks[l], &a.ls[l], &g.blocks[l]
		// x[l+1] = x2 + down(relu(up(norm(x2))))
		linearBackward(rows, &b.down, &gb.down, full, la.r, dx, ga.dr, false)
		for i, v := range la.r[:rows*c.Hidden] {
			if v <= 0 {
				ga.dr[i] = 0
			}
		}
		linearBackward(rows, &b.up, &gb.up, full, la.h2, ga.dr, dh, false)
		dg, db = nil, nil
		if full {
			dg, db = gb.ln2g, gb.ln2b
		}
		layerNormBackward(rows, d, la.x2, b.ln2g, la.mean2, la.rstd2, dh, dx, dg, db)
		// x2 = x[l] + o(attention(q, k, v)(norm(x[l])))
		linearBackward(rows, &b.o, &gb.o, full, la.att, dx, ga.datt, false)
		clear(ga.dq)
		clear(ga.dk)
		clear(ga.dv)
		for _, s := range a.spans {
			o := s.start * d
			attendBackward(s.n, d, H, ctx, la.q[o:], la.k[o:], la.v[o:], la.probs[s.start*H*ctx:],
				ga.datt[o:], ga.dq[o:], ga.dk[o:], ga.dv[o:])
		}
		linearBackward(rows, &b.q, &gb.q, full, la.h1, ga.dq, dh, false)
		linearBackward(rows, &b.k, &gb.k, full, la.h1, ga.dk, dh, true)
		linearBackward(rows, &b.v, &gb.v, full, la.h1, ga.dv, dh, true)
		if !full && l == 0 {
			break // nothing below needs a gradient
		}
		dg, db = nil, nil
		if full {
			dg, db = gb.ln1g, gb.ln1b
		}
		layerNormBackward(rows, d, a.x[l], b.ln1g, la.mean1, la.rstd1, dh, dx, dg, db)
	}
	if !full {
		return
	}
	for r := 0; r < rows; r++ {
		t, p := int(a.tokens[r]), int(a.pos[r])
		dr, gt, gp := dx[r*d:(r+1)*d], g.tok[t*d:(t+1)*d], g.pos[p*d:(p+1)*d]
		for i, v := range dr {
			gt[i] += v
			gp[i] += v
		}
	}
}
