package artifactstest

import (
	"maps"
	"time"

	"github.com/rlpipe/rlpipe/artifacts"
)

var provenanceScenarios = []scenario{
	{"RoundTrip", testProvenanceRoundTrip},
	{"Absent", testProvenanceAbsent},
}

func testProvenanceRoundTrip(f *fixture) {
	t := f.t
	seed := int64(-42)
	want := artifacts.Provenance{
		Task:        "rollout",
		TaskVersion: "3",
		Inputs: map[string]string{
			"main:data/prompts.parquet": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			"policy":                    "sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752",
		},
		ConfigHash:    "c0ffee",
		PolicyVersion: "adapter-7f3a",
		Seed:          &seed,
		CreatedAt:     time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC),
	}
	extra := map[string]string{"rows": "1024"}
	meta, err := want.Metadata(extra)
	if err != nil {
		t.Fatal(err)
	}
	f.putWith("main", "runs/r1/rollouts.parquet", []byte("PAR1...PAR1"), &artifacts.PutOptions{
		ContentType: "application/vnd.apache.parquet", Metadata: meta,
	})

	check := func(ref string) {
		t.Helper()
		info := f.stat(ref, "runs/r1/rollouts.parquet")
		wantMap(t, "stat "+ref+": metadata", info.Metadata, meta)
		got, ok, err := artifacts.ProvenanceFromMetadata(info.Metadata)
		if err != nil || !ok {
			t.Fatalf("provenance from %s: ok=%v err=%v", ref, ok, err)
		}
		wantProvenance(t, "provenance from "+ref, got, want)
		wantEqual(t, "extra metadata on "+ref, info.Metadata["rows"], "1024")

		_, getInfo, err := readObject(f.ctx, f.st, ref, "runs/r1/rollouts.parquet")
		if err != nil {
			t.Fatalf("get %s: %v", ref, err)
		}
		got, ok, err = artifacts.ProvenanceFromMetadata(getInfo.Metadata)
		if err != nil || !ok {
			t.Fatalf("provenance from get %s: ok=%v err=%v", ref, ok, err)
		}
		wantProvenance(t, "provenance from get "+ref, got, want)
	}
	check("main")
	f.commit("main", "rollouts")
	check("main@")
	// Provenance travels with the object to new branches and through merges.
	f.branch("copy", "main")
	check("copy")
	if m, ok := f.st.(artifacts.Merger); ok {
		f.branch("feature", "main")
		f.putCommit("main", "unrelated", "x")
		f.putWith("feature", "runs/r1/rollouts.parquet", []byte("PAR1...PAR1 v2"), &artifacts.PutOptions{Metadata: meta})
		f.commit("feature", "v2")
		if _, err := m.Merge(f.ctx, "feature", "main", nil); err != nil {
			t.Fatalf("merge: %v", err)
		}
		check("main")
	}
}

func wantProvenance(t testingT, step string, got, want artifacts.Provenance) {
	t.Helper()
	switch {
	case got.Task != want.Task, got.TaskVersion != want.TaskVersion,
		got.ConfigHash != want.ConfigHash, got.PolicyVersion != want.PolicyVersion,
		!maps.Equal(got.Inputs, want.Inputs),
		(got.Seed == nil) != (want.Seed == nil), got.Seed != nil && *got.Seed != *want.Seed,
		!got.CreatedAt.Equal(want.CreatedAt):
		t.Fatalf("%s: got %+v (seed %v), want %+v (seed %v)", step, got, deref(got.Seed), want, deref(want.Seed))
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func testProvenanceAbsent(f *fixture) {
	t := f.t
	f.put("main", "imported.csv", "a,b\n1,2\n")
	info := f.stat("main", "imported.csv")
	_, ok, err := artifacts.ProvenanceFromMetadata(info.Metadata)
	if err != nil || ok {
		t.Fatalf("provenance of an imported object: ok=%v err=%v, want none", ok, err)
	}
}
