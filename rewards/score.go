package rewards

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"golang.org/x/sync/errgroup"

	"github.com/rlpipe/rlpipe/artifacts/tables"
)

// Defaults for ScoreOptions.
const (
	DefaultRunnerConcurrency = 16
	// defaultScoreBatchRows keeps a batch's completions (~2.5 MB) in cache
	// while they are decoded and scored; larger batches measured slower.
	defaultScoreBatchRows = 4096
	// MaxFirstErrors is how many row errors a Summary keeps.
	MaxFirstErrors = 10
)

// ScoreOptions tune ScoreFile. A nil *ScoreOptions means the defaults.
type ScoreOptions struct {
	// Name identifies the trajectories file in errors (default
	// "trajectories").
	Name string
	// Prompts is the prompts table, joined by prompt_id. Required when
	// the spec reads prompt, messages, answer or metadata. Prompts from
	// ReadPromptsAsync are waited for before the first row is evaluated.
	// Program.ReadPrompts reads only the columns the program needs;
	// prompts read that way for another program that lack a column this
	// one reads are an error.
	Prompts *Prompts
	// Concurrency is how many row groups are scored at once (default
	// GOMAXPROCS). Output order does not depend on it.
	Concurrency int
	// RunnerConcurrency is how many rows of a batch run their verifiers
	// and judges at once (default 16). Unused when the spec has none.
	RunnerConcurrency int
	// Memo is handed to every verifier and judge call (default none): the
	// task call's *pipeline.TaskContext, so that what they record is
	// replayed by a retry, a resumed run or a rescoring.
	Memo Memoizer
	// Limit scores only the first Limit rows (0: all), as a check of a
	// spec against a sample does.
	Limit int64
	// BatchRows is the number of rows read per batch (default 4,096).
	BatchRows int
	// Write tunes the rewards file written.
	Write *tables.WriteOptions
}

func (o *ScoreOptions) withDefaults() ScoreOptions {
	var v ScoreOptions
	if o != nil {
		v = *o
	}
	if v.Name == "" {
		v.Name = "trajectories"
	}
	if v.Concurrency <= 0 {
		v.Concurrency = runtime.GOMAXPROCS(0)
	}
	if v.RunnerConcurrency <= 0 {
		v.RunnerConcurrency = DefaultRunnerConcurrency
	}
	if v.BatchRows <= 0 {
		v.BatchRows = defaultScoreBatchRows
	}
	return v
}

// Summary counts what ScoreFile did.
type Summary struct {
	// Rows is the number of reward rows written: one per trajectory read.
	Rows int64
	// Scored rows have status ok; Skipped rows had a trajectory status the
	// spec does not score; Errors rows failed (status error); Nonfinite
	// rows have a reward that came out NaN or infinite (status nonfinite).
	Scored, Skipped, Errors, Nonfinite int64
	// SkippedBy counts skipped rows by trajectory status.
	SkippedBy map[string]int64
	// Components has the statistics of each component over scored rows.
	Components map[string]Stats
	// Total has the statistics of the total over scored rows.
	Total Stats
	// FirstErrors are the first failed rows (error or nonfinite), in row
	// order (at most MaxFirstErrors).
	FirstErrors []RowError
	// FirstNonfinite is the first nonfinite row (nil for none).
	FirstNonfinite *RowError
}

// addFailure counts a row that failed with f (e's Message is f's).
func (s *Summary) addFailure(f fault, e RowError) {
	e.Status = f.status
	if f.status == StatusNonfinite {
		s.Nonfinite++
	} else {
		s.Errors++
	}
	if len(s.FirstErrors) < MaxFirstErrors || f.status == StatusNonfinite && s.FirstNonfinite == nil {
		// The prompt id is a view of the batch's buffers, recycled.
		e.PromptID = strings.Clone(e.PromptID)
	}
	if len(s.FirstErrors) < MaxFirstErrors {
		s.FirstErrors = append(s.FirstErrors, e)
	}
	if f.status == StatusNonfinite && s.FirstNonfinite == nil {
		s.FirstNonfinite = &e
	}
}

// CheckFinite returns a *tables.NonfiniteError (tables.ErrNoFiniteReward)
// when no row was scored and some rewards came out NaN or infinite: the
// batch has nothing to train on. The reward task fails with it.
func (s *Summary) CheckFinite() error {
	if s.Scored > 0 || s.FirstNonfinite == nil {
		return nil
	}
	e := s.FirstNonfinite
	return &tables.NonfiniteError{Nonfinite: s.Nonfinite, Scorable: s.Rows - s.Skipped,
		PromptID: e.PromptID, SampleIndex: e.SampleIndex, Reason: e.Message}
}

// Stats summarises values.
type Stats struct {
	Count         int64
	Sum, Min, Max float64
}

// Mean returns the mean, or NaN for no values.
func (s Stats) Mean() float64 {
	if s.Count == 0 {
		return math.NaN()
	}
	return s.Sum / float64(s.Count)
}

func (s *Stats) add(v float64) {
	if s.Count == 0 || v < s.Min {
		s.Min = v
	}
	if s.Count == 0 || v > s.Max {
		s.Max = v
	}
	s.Count++
	s.Sum += v
}

func (s *Stats) merge(o Stats) {
	if o.Count == 0 {
		return
	}
	if s.Count == 0 || o.Min < s.Min {
		s.Min = o.Min
	}
	if s.Count == 0 || o.Max > s.Max {
		s.Max = o.Max
	}
	s.Count += o.Count
	s.Sum += o.Sum
}

// RowError is a row that failed.
type RowError struct {
	// Row is the row's 0-based index in the trajectories file.
	Row         int64
	PromptID    string
	SampleIndex int32
	// Status is the row's: StatusError or StatusNonfinite.
	Status  string
	Message string
}

func (e RowError) String() string {
	return fmt.Sprintf("row %d (prompt %s, sample %d): %s", e.Row, e.PromptID, e.SampleIndex, e.Message)
}

func (s *Summary) merge(o *Summary) {
	s.Rows += o.Rows
	s.Scored += o.Scored
	s.Skipped += o.Skipped
	s.Errors += o.Errors
	s.Nonfinite += o.Nonfinite
	if s.FirstNonfinite == nil {
		s.FirstNonfinite = o.FirstNonfinite
	}
	for k, v := range o.SkippedBy {
		if s.SkippedBy == nil {
			s.SkippedBy = map[string]int64{}
		}
		s.SkippedBy[k] += v
	}
	for k, v := range o.Components {
		if s.Components == nil {
			s.Components = map[string]Stats{}
		}
		c := s.Components[k]
		c.merge(v)
		s.Components[k] = c
	}
	s.Total.merge(o.Total)
	for _, e := range o.FirstErrors {
		if len(s.FirstErrors) < MaxFirstErrors {
			s.FirstErrors = append(s.FirstErrors, e)
		}
	}
}

// input is an open trajectories file shared by the workers.
type input struct {
	name   string
	r      io.ReaderAt
	size   int64
	md     *metadata.FileMetaData
	leaves []int // leaf columns read
}

// always-read columns: the keys of the output and the skip policy.
var baseColumns = []string{"prompt_id", "sample_index", "status", "error"}

// ScoreFile scores a trajectories file (src, size bytes) and writes a
// rewards file to dst, one row per trajectory in the same order. Row
// groups are scored in parallel; only the columns the expressions read
// are decoded. Rows that fail or are skipped get a status and null
// components (see the package documentation); the returned error is for
// what stops the whole file: an unreadable input, a failed write, a
// canceled context, a spec that reads prompts without ScoreOptions.Prompts,
// prompts from ReadPromptsAsync that could not be read.
func (p *Program) ScoreFile(ctx context.Context, dst io.Writer, src io.ReaderAt, size int64, opts *ScoreOptions) (Summary, error) {
	o := opts.withDefaults()
	var sum Summary
	if p.UsesPrompts() && o.Prompts == nil {
		return sum, fmt.Errorf("score %q: %w: pass ScoreOptions.Prompts (the expressions read %v)", o.Name, ErrNoPrompts, p.Variables())
	}
	if need := p.PromptColumns(); o.Prompts != nil && !o.Prompts.covers(need) {
		if need == nil {
			need = []string{"every column (the spec has verifiers, judges or functions)"}
		}
		return sum, fmt.Errorf("score %q: %w: the prompts were read with columns %v, this spec needs %v: read them with this program's ReadPrompts, or with rewards.ReadPrompts for all columns",
			o.Name, ErrNoPrompts, o.Prompts.cols, need)
	}
	in, err := p.open(src, size, o.Name)
	if err != nil {
		return sum, err
	}
	// Row groups to score, and how many rows of each.
	type part struct {
		rg    int
		first int64
		take  int64
	}
	var parts []part
	var first int64
	for rg := 0; rg < in.md.NumRowGroups(); rg++ {
		n := in.md.RowGroup(rg).NumRows()
		take := n
		if o.Limit > 0 {
			take = min(n, o.Limit-first)
		}
		if take <= 0 {
			break
		}
		parts = append(parts, part{rg, first, take})
		first += n
	}
	w, err := tables.NewWriter(dst, p.table, o.Write)
	if err != nil {
		return sum, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work, wctx := errgroup.WithContext(ctx)
	work.SetLimit(o.Concurrency)
	outs := make([]*rgOut, len(parts))
	for k, pt := range parts {
		outs[k] = newRGOut(pt.take, o.BatchRows)
	}
	// Row groups started and not yet written; tokens bound how many.
	tokens := make(chan struct{}, 2*o.Concurrency)
	var spawn errgroup.Group
	spawn.Go(func() error {
		for k, pt := range parts {
			select {
			case tokens <- struct{}{}:
			case <-wctx.Done():
				return nil
			}
			work.Go(func() error {
				return p.scoreRowGroup(wctx, in, &o, pt.rg, pt.first, pt.take, outs[k])
			})
		}
		return nil
	})
	var werr error
	for _, out := range outs {
		if werr = out.writeTo(wctx, w); werr != nil {
			break
		}
		sum.merge(&out.sum)
		<-tokens
	}
	if werr != nil {
		cancel()
	}
	spawn.Wait()
	err = work.Wait()
	if err == nil && werr == nil && o.Prompts != nil {
		// Prompts read in the background fail the call even when no row
		// needed them, and are read to the end before it returns.
		err = o.Prompts.wait(ctx)
	}
	for _, out := range outs {
		out.discard()
	}
	cerr := w.Close()
	switch {
	case werr != nil && !errors.Is(werr, context.Canceled):
		// The write failed first; the workers stopped for it.
		return sum, fmt.Errorf("write rewards: %w", werr)
	case err != nil:
		return sum, err
	case werr != nil:
		if ctx.Err() != nil && errors.Is(werr, context.Canceled) {
			return sum, context.Cause(ctx)
		}
		return sum, fmt.Errorf("write rewards: %w", werr)
	case cerr != nil:
		return sum, fmt.Errorf("write rewards: %w", cerr)
	}
	return sum, nil
}

// open checks the file as a trajectories table and prepares the column
// projection.
func (p *Program) open(src io.ReaderAt, size int64, name string) (*input, error) {
	rd, err := tables.NewReader(src, size, name, tables.Trajectories, nil)
	if err != nil {
		return nil, err
	}
	md := rd.File().ParquetMetadata()
	rd.Close()
	want := map[string]bool{}
	for _, c := range baseColumns {
		want[c] = true
	}
	runners := p.readsWholeRows()
	for i, v := range variables {
		if v.column != "" && (p.uses.has(i) || runners) {
			want[v.column] = true
		}
	}
	if p.uses.has(vRow) {
		// The trajectory's columns of Row.Columns, besides baseColumns.
		want["finish_reason"], want["num_tokens"] = true, true
	}
	in := &input{name: name, r: src, size: size, md: md}
	sc := md.Schema
	for i := 0; i < sc.NumColumns(); i++ {
		if want[sc.ColumnRoot(i).Name()] {
			in.leaves = append(in.leaves, i)
		}
	}
	return in, nil
}

// readAlloc recycles the buffers of decoded batches (see poolAllocator).
var readAlloc = &poolAllocator{}

// rgOut is what scoring a row group gives: its reward batches, handed
// to the writer as they are made, so that it writes a row group while
// the row group is being scored; then its summary.
type rgOut struct {
	// recs has room for every batch of the row group, so a worker never
	// waits for the writer; it is closed after the last one.
	recs chan arrow.RecordBatch
	// ok and sum are set before recs is closed: ok when every batch was
	// sent.
	ok  bool
	sum Summary
}

func newRGOut(rows int64, batchRows int) *rgOut {
	return &rgOut{recs: make(chan arrow.RecordBatch, int(rows)/batchRows+1)}
}

// writeTo writes the row group's batches as they come, and fails if the
// row group was not scored to the end or ctx is done first.
func (r *rgOut) writeTo(ctx context.Context, w *tables.Writer[tables.Reward]) error {
	for {
		select {
		case rec, more := <-r.recs:
			if !more {
				if !r.ok {
					// The worker failed: its error cancels ctx.
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}
			err := w.WriteRecord(rec)
			rec.Release()
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// discard releases the batches left unwritten. The row group's worker
// has returned, or was never started.
func (r *rgOut) discard() {
	for {
		select {
		case rec, more := <-r.recs:
			if !more {
				return
			}
			rec.Release()
		default:
			return
		}
	}
}

// scoreRowGroup reads and scores the first take rows of row group rg,
// whose first row is row first of the file, sending the reward batches
// to out.
func (p *Program) scoreRowGroup(ctx context.Context, in *input, o *ScoreOptions, rg int, first, take int64, out *rgOut) (err error) {
	defer close(out.recs)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read trajectories file %q row group %d: %w: corrupt data (%v)", in.name, rg, tables.ErrNotParquet, r)
		}
	}()
	mem := readAlloc
	props := parquet.NewReaderProperties(mem)
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	pf, err := file.NewParquetReader(io.NewSectionReader(in.r, 0, in.size), file.WithReadProps(props), file.WithMetadata(in.md))
	if err != nil {
		return fmt.Errorf("read trajectories file %q: %w: %v", in.name, tables.ErrNotParquet, err)
	}
	// PreAllocBinaryData sizes each batch's string data from the column
	// chunk's size before decoding, rather than growing it by copies.
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(o.BatchRows), PreAllocBinaryData: true}, mem)
	if err != nil {
		return fmt.Errorf("read trajectories file %q: %w: %v", in.name, tables.ErrNotParquet, err)
	}
	rr, err := fr.GetRecordReader(ctx, in.leaves, []int{rg})
	if err != nil {
		return fmt.Errorf("read trajectories file %q row group %d: %w", in.name, rg, err)
	}
	defer rr.Release()
	s := newScorer(p, o, readAlloc)
	defer s.release()
	row := first
	left := take
	for left > 0 && rr.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Prompts read in the background are waited for only now, with
		// the first batch decoded.
		if o.Prompts != nil {
			if err := o.Prompts.wait(ctx); err != nil {
				return err
			}
		}
		rec := rr.RecordBatch()
		n := min(rec.NumRows(), left)
		res, err := s.batch(ctx, rec, int(n), row, &out.sum)
		if err != nil {
			return err
		}
		select {
		case out.recs <- res:
		case <-ctx.Done():
			res.Release()
			return ctx.Err()
		}
		row += n
		left -= n
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read trajectories file %q row group %d: %w", in.name, rg, err)
	}
	out.ok = true
	return nil
}

// scorer scores batches for one worker, reusing its activation, batch
// view and output builders from batch to batch.
type scorer struct {
	p    *Program
	o    *ScoreOptions
	b    *array.RecordBuilder
	src  batchSource
	act  activation
	vals []float64
	// stats are the components' statistics of the summary being added to.
	stats []Stats
	// runners: the spec has verifiers or judges, whose outputs differ
	// from row to row.
	runners bool

	// Output columns.
	promptID    *array.StringBuilder
	sampleIndex *array.Int32Builder
	comps       []*array.Float64Builder
	total       *array.Float64Builder
	verifiers   *array.StringBuilder // unused without runners
	judges      *array.StringBuilder // unused without runners
	status      *array.StringBuilder
	errCol      *array.StringBuilder
	// consts are the columns that hold one value on every row, by field
	// index: the spec digest, and the runners' empty outputs when the spec
	// has none. Each batch gets a slice of a column made once (see
	// constant), rather than the value appended row by row.
	consts map[int]constCol
	cols   []arrow.Array
}

// constCol is a column of one value, made for the largest batch yet.
type constCol struct {
	v   string
	arr arrow.Array
}

func newScorer(p *Program, o *ScoreOptions, mem memory.Allocator) *scorer {
	sc := p.table.Schema()
	b := array.NewRecordBuilder(mem, sc)
	field := func(name string) array.Builder { return b.Field(sc.FieldIndices(name)[0]) }
	s := &scorer{p: p, o: o, b: b, vals: make([]float64, len(p.comps)), stats: make([]Stats, len(p.comps))}
	s.promptID = field("prompt_id").(*array.StringBuilder)
	s.sampleIndex = field("sample_index").(*array.Int32Builder)
	for _, c := range p.comps {
		s.comps = append(s.comps, field(tables.ComponentPrefix+c.name).(*array.Float64Builder))
	}
	s.total = field("total").(*array.Float64Builder)
	s.verifiers = field("verifier_outputs").(*array.StringBuilder)
	s.judges = field("judge_outputs").(*array.StringBuilder)
	s.status = field("status").(*array.StringBuilder)
	s.errCol = field("error").(*array.StringBuilder)
	s.runners = len(p.verifiers)+len(p.judges) > 0
	index := func(name string) int { return sc.FieldIndices(name)[0] }
	s.consts = map[int]constCol{index("spec_digest"): {v: p.digest}}
	if !s.runners {
		s.consts[index("verifier_outputs")] = constCol{}
		s.consts[index("judge_outputs")] = constCol{}
	}
	s.src.p = p
	s.src.prompts = o.Prompts
	return s
}

func (s *scorer) release() {
	s.b.Release()
	for _, c := range s.consts {
		if c.arr != nil {
			c.arr.Release()
		}
	}
}

// constant returns n rows of field i's one value.
func (s *scorer) constant(i, n int) arrow.Array {
	c := s.consts[i]
	if c.arr == nil || c.arr.Len() < n {
		if c.arr != nil {
			c.arr.Release()
		}
		b := array.NewStringBuilder(readAlloc)
		b.Reserve(n)
		b.ReserveData(n * len(c.v))
		for range n {
			b.Append(c.v)
		}
		c.arr = b.NewArray()
		b.Release()
		s.consts[i] = c
	}
	return array.NewSlice(c.arr, 0, int64(n))
}

// record returns the n rows built as a record batch: the builders'
// columns and the constant ones.
func (s *scorer) record(n int) arrow.RecordBatch {
	s.cols = s.cols[:0]
	for i, f := range s.b.Fields() {
		if _, ok := s.consts[i]; ok {
			s.cols = append(s.cols, s.constant(i, n))
		} else {
			s.cols = append(s.cols, f.NewArray())
		}
	}
	rec := array.NewRecordBatch(s.b.Schema(), s.cols, int64(n))
	for _, c := range s.cols {
		c.Release()
	}
	return rec
}

// batch scores the first n rows of rec, the first of which is row first
// of the file, and returns the reward rows as a record batch.
func (s *scorer) batch(ctx context.Context, rec arrow.RecordBatch, n int, first int64, sum *Summary) (arrow.RecordBatch, error) {
	if err := s.src.bind(rec); err != nil {
		return nil, err
	}
	p := s.p
	src := &s.src
	s.b.Reserve(n)
	// The string columns' data, sized up front rather than grown by
	// doubling: the prompt ids as read.
	if ids, ok := src.promptID.(*array.String); ok && n > 0 {
		s.promptID.ReserveData(ids.ValueOffset(n-1) + ids.ValueLen(n-1) - ids.ValueOffset(0))
	}
	s.status.ReserveData(n * len(StatusOK))
	// The components' statistics are kept in s.stats during the batch.
	for j, c := range p.comps {
		s.stats[j] = sum.Components[c.name]
	}
	scored := false
	var outs []runnerOutputs
	var faults []fault
	if s.runners {
		var err error
		outs, faults, err = s.runAll(ctx, n)
		if err != nil {
			return nil, err
		}
	}
	fnVals, fnFaults, err := s.functions(ctx, n)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		st := src.status.Value(i)
		s.promptID.Append(src.promptID.Value(i))
		s.sampleIndex.Append(src.sampleIndex[i])
		sum.Rows++
		if !p.scored[st] {
			s.skip(st, i, sum)
			continue
		}
		var f fault
		var total float64
		if outs != nil {
			v, j, encMsg := p.outputsJSON(&outs[i])
			s.verifiers.Append(v)
			s.judges.Append(j)
			f = faults[i]
			if f.msg == "" && encMsg != "" {
				f = failed(encMsg)
			}
			if f.msg == "" {
				src.verifierVals, src.judgeVals = p.values(&outs[i])
			}
		}
		if fnVals != nil {
			if f.msg == "" {
				f = fnFaults[i]
			}
			src.functionVals = fnVals[i]
		}
		if f.msg == "" {
			s.act.at(src, i)
			total, f = p.evalRow(&s.act, s.vals)
		}
		if f.msg != "" {
			for _, c := range s.comps {
				c.AppendNull()
			}
			s.total.Append(math.NaN())
			s.status.Append(f.status)
			s.errCol.Append(f.msg)
			sum.addFailure(f, RowError{Row: first + int64(i), PromptID: src.promptID.Value(i), SampleIndex: src.sampleIndex[i], Message: f.msg})
			continue
		}
		for j, c := range s.comps {
			c.Append(s.vals[j])
			s.stats[j].add(s.vals[j])
		}
		scored = true
		s.total.Append(total)
		sum.Total.add(total)
		s.status.Append(StatusOK)
		s.errCol.AppendNull()
		sum.Scored++
	}
	if scored {
		if sum.Components == nil {
			sum.Components = make(map[string]Stats, len(p.comps))
		}
		for j, c := range p.comps {
			sum.Components[c.name] = s.stats[j]
		}
	}
	return s.record(n), nil
}

func (s *scorer) skip(status string, i int, sum *Summary) {
	for _, c := range s.comps {
		c.AppendNull()
	}
	s.total.Append(math.NaN())
	if s.runners {
		s.verifiers.AppendEmptyValue()
		s.judges.AppendEmptyValue()
	}
	s.status.Append(SkippedPrefix + status)
	if s.src.errCol != nil && !s.src.errCol.IsNull(i) {
		s.errCol.Append(s.src.errCol.Value(i))
	} else {
		s.errCol.AppendNull()
	}
	sum.Skipped++
	if sum.SkippedBy == nil {
		sum.SkippedBy = map[string]int64{}
	}
	sum.SkippedBy[intern(status)]++
}

// intern returns a string equal to s that does not share memory with a
// batch, whose buffers are recycled. (A map assignment stores the key it
// is given even when the key exists.)
func intern(s string) string {
	for _, k := range tables.Statuses {
		if s == k {
			return k
		}
	}
	return strings.Clone(s)
}

// runAll runs the verifiers and judges of the scored rows among the first
// n, RunnerConcurrency rows at a time.
func (s *scorer) runAll(ctx context.Context, n int) ([]runnerOutputs, []fault, error) {
	outs := make([]runnerOutputs, n)
	faults := make([]fault, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.o.RunnerConcurrency)
	for i := 0; i < n; i++ {
		row, ok := s.scoredRow(i)
		if !ok {
			continue
		}
		g.Go(func() error {
			f, err := s.p.run(gctx, &row, s.o.Memo, &outs[i])
			faults[i] = f
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return outs, faults, nil
}

// scoredRow returns row i with its prompt, and false when the spec does
// not score its status.
func (s *scorer) scoredRow(i int) (Row, bool) {
	if !s.p.scored[s.src.status.Value(i)] {
		return Row{}, false
	}
	row := s.src.rowAt(i)
	if e := s.src.lookup(row.Trajectory.PromptID); e != nil {
		row.Prompt, row.HasPrompt = e.p, true
	}
	return row, true
}

// functions calls the program's functions once on the scored rows among
// the first n, and returns each row's functions variable and fault (nil
// when the spec has no functions).
func (s *scorer) functions(ctx context.Context, n int) ([]ref.Val, []fault, error) {
	if len(s.p.functions) == 0 {
		return nil, nil, nil
	}
	var rows []Row
	var at []int
	for i := 0; i < n; i++ {
		row, ok := s.scoredRow(i)
		if !ok {
			continue
		}
		rows = append(rows, row)
		at = append(at, i)
	}
	vals := make([]ref.Val, n)
	faults := make([]fault, n)
	if len(rows) == 0 {
		return vals, faults, nil
	}
	v, f, err := s.p.callFunctions(ctx, rows, s.o.Memo)
	if err != nil {
		return nil, nil, err
	}
	for j, i := range at {
		vals[i], faults[i] = v[j], f[j]
	}
	return vals, faults, nil
}

// strArray is a string column: String or LargeString.
type strArray interface {
	Value(int) string
	IsNull(int) bool
}

// batchSource serves the variables of a record batch's rows straight
// from its columns: strings are views of the column buffers, not copies.
type batchSource struct {
	p       *Program
	prompts *Prompts

	str                              [numVars]strArray
	i32                              [numVars][]int32
	promptID, status, errCol         strArray
	sampleIndex                      []int32
	turns                            *array.List
	turnRole, turnContent, turnCalls strArray
	outcome                          strArray // env_outcome; nil before version 3
	lastID                           string
	lastEntry                        *promptEntry
	verifierVals, judgeVals          ref.Val
	functionVals                     ref.Val
}

// bind points the source at a batch's columns.
func (s *batchSource) bind(rec arrow.RecordBatch) error {
	sc := rec.Schema()
	col := func(name string) arrow.Array {
		if ix := sc.FieldIndices(name); len(ix) > 0 {
			return rec.Column(ix[0])
		}
		return nil
	}
	strs := func(name string) (strArray, error) {
		switch a := col(name).(type) {
		case nil:
			return nil, nil
		case *array.String:
			return a, nil
		case *array.LargeString:
			return a, nil
		default:
			return nil, fmt.Errorf("score: column %q is %s, want string", name, a.DataType())
		}
	}
	ints := func(name string) ([]int32, error) {
		switch a := col(name).(type) {
		case nil:
			return nil, nil
		case *array.Int32:
			return a.Int32Values(), nil
		default:
			return nil, fmt.Errorf("score: column %q is %s, want int32", name, a.DataType())
		}
	}
	var err error
	if s.promptID, err = strs("prompt_id"); err != nil {
		return err
	}
	if s.status, err = strs("status"); err != nil {
		return err
	}
	if s.errCol, err = strs("error"); err != nil {
		return err
	}
	if s.sampleIndex, err = ints("sample_index"); err != nil {
		return err
	}
	for k, v := range variables {
		if v.column == "" {
			continue
		}
		switch v.typ {
		case types.StringType:
			if s.str[k], err = strs(v.column); err != nil {
				return err
			}
		case types.IntType:
			if s.i32[k], err = ints(v.column); err != nil {
				return err
			}
		}
	}
	if s.outcome, err = strs("env_outcome"); err != nil {
		return err
	}
	s.turns = nil
	if l, ok := col("turns").(*array.List); ok {
		st, ok := l.ListValues().(*array.Struct)
		if !ok || st.NumField() < 3 {
			return fmt.Errorf("score: column turns is %s, want list of struct<role, content, tool_calls>", l.DataType())
		}
		s.turns = l
		if s.turnRole, err = structStr(st, "role"); err != nil {
			return err
		}
		if s.turnContent, err = structStr(st, "content"); err != nil {
			return err
		}
		if s.turnCalls, err = structStr(st, "tool_calls"); err != nil {
			return err
		}
	}
	return nil
}

func structStr(st *array.Struct, name string) (strArray, error) {
	t := st.DataType().(*arrow.StructType)
	i, ok := t.FieldIdx(name)
	if !ok {
		return nil, fmt.Errorf("score: turns has no field %q", name)
	}
	a, ok := st.Field(i).(strArray)
	if !ok {
		return nil, fmt.Errorf("score: turns.%s is %s, want string", name, st.Field(i).DataType())
	}
	return a, nil
}

func (s *batchSource) lookup(id string) *promptEntry {
	if s.prompts == nil {
		return nil
	}
	var e *promptEntry
	if s.lastEntry != nil {
		if s.lastID == id {
			return s.lastEntry
		}
		if n := s.lastEntry.next; n != nil && n.p.PromptID == id {
			e = n
		}
	}
	if e == nil {
		e = s.prompts.m[id]
	}
	if e != nil {
		s.lastID, s.lastEntry = e.p.PromptID, e
	}
	return e
}

func (s *batchSource) value(k, i int) ref.Val {
	switch k {
	case vCompletion, vPromptID, vGroupID, vFinishReason, vStatus, vPolicyVersion:
		return types.String(s.str[k].Value(i))
	case vSampleIndex, vNumTokens, vStaleness:
		return types.Int(s.i32[k][i])
	case vTurns:
		return s.turnsAt(i)
	case vVerifiers:
		return s.verifierVals
	case vJudges:
		return s.judgeVals
	case vFunctions:
		return s.functionVals
	case vOutcome:
		return outcomeValue(s.promptID.Value(i), s.sampleIndex[i], s.outcomeAt(i))
	case vRow:
		return s.rowVar(i)
	}
	id := s.promptID.Value(i)
	e := s.lookup(id)
	if e == nil {
		return missingPrompt(id)
	}
	return e.value(k)
}

func (s *batchSource) strVar(k, i int) (string, bool) {
	switch k {
	case vCompletion, vPromptID, vGroupID, vFinishReason, vStatus, vPolicyVersion:
		if s.str[k] == nil {
			return "", false
		}
		return s.str[k].Value(i), true
	case vPrompt, vAnswer:
		if e := s.lookup(s.promptID.Value(i)); e != nil {
			return e.str(k)
		}
	}
	return "", false
}

func (s *batchSource) intVar(k, i int) (int64, bool) {
	switch k {
	case vSampleIndex, vNumTokens, vStaleness:
		if s.i32[k] == nil {
			return 0, false
		}
		return int64(s.i32[k][i]), true
	}
	return 0, false
}

// outcomeAt is row i's env_outcome, nil when null or absent.
func (s *batchSource) outcomeAt(i int) *string {
	if s.outcome == nil || s.outcome.IsNull(i) {
		return nil
	}
	v := s.outcome.Value(i)
	return &v
}

func (s *batchSource) turnsAt(i int) ref.Val {
	from, to := s.turns.ValueOffsets(i)
	out := make([]ref.Val, 0, to-from)
	for j := int(from); j < int(to); j++ {
		var calls *string
		if !s.turnCalls.IsNull(j) {
			c := s.turnCalls.Value(j)
			calls = &c
		}
		out = append(out, turnValue(s.turnRole.Value(j), s.turnContent.Value(j), calls))
	}
	return types.NewRefValList(types.DefaultTypeAdapter, out)
}

// rowAt builds the Row verifiers and judges receive. Token ids,
// logprobs, the sampler and the seed are not read for scoring and are
// left empty.
func (s *batchSource) rowAt(i int) Row {
	var t tables.Trajectory
	str := func(k int) string {
		if s.str[k] == nil {
			return ""
		}
		return s.str[k].Value(i)
	}
	i32 := func(k int) int32 {
		if s.i32[k] == nil {
			return 0
		}
		return s.i32[k][i]
	}
	t.PromptID = s.promptID.Value(i)
	t.SampleIndex = s.sampleIndex[i]
	t.GroupID = str(vGroupID)
	t.Completion = str(vCompletion)
	t.FinishReason = str(vFinishReason)
	t.NumTokens = i32(vNumTokens)
	t.PolicyVersion = str(vPolicyVersion)
	t.Staleness = i32(vStaleness)
	t.Status = s.status.Value(i)
	t.EnvOutcome = s.outcomeAt(i)
	if s.turns != nil {
		from, to := s.turns.ValueOffsets(i)
		for j := int(from); j < int(to); j++ {
			tu := tables.Turn{Role: s.turnRole.Value(j), Content: s.turnContent.Value(j)}
			if !s.turnCalls.IsNull(j) {
				c := s.turnCalls.Value(j)
				tu.ToolCalls = &c
			}
			t.Turns = append(t.Turns, tu)
		}
	}
	return Row{Trajectory: t}
}
