package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlpipe/rlpipe/artifacts"
)

func newStatCommand(g *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "stat REF:PATH",
		Short:   "describe an object: size, checksum, metadata and provenance",
		Example: "  rlpipe stat main:data/prompts.parquet\n  rlpipe stat runs-exp1:iterations/000003/rewards.parquet -o json",
		Args:    exactArgs("REF:PATH"),
		RunE: g.onStore(func(ctx context.Context, st artifacts.Store, args []string, p printer) error {
			return statFunc(ctx, st, args[0], p)
		}),
	}
}

// statOut is the JSON shape of stat.
type statOut struct {
	Ref string `json:"ref"`
	artifacts.ObjectInfo
	// Provenance is decoded from the metadata; absent for imported files.
	Provenance *artifacts.Provenance `json:"provenance,omitempty"`
	// ProvenanceError says why provenance metadata could not be decoded.
	ProvenanceError string `json:"provenance_error,omitempty"`
}

func statFunc(ctx context.Context, st artifacts.Store, arg string, p printer) error {
	a, err := parseObjectArtifact(arg)
	if err != nil {
		return err
	}
	info, err := st.StatObject(ctx, a.ref, a.path)
	if err != nil {
		return withOp(err, "stat %s", a)
	}
	out := statOut{Ref: a.ref, ObjectInfo: info}
	// Damaged provenance should not hide the rest of the description.
	prov, ok, perr := artifacts.ProvenanceFromMetadata(info.Metadata)
	if perr != nil {
		out.ProvenanceError = perr.Error()
	}
	if ok {
		out.Provenance = &prov
	}
	if p.json {
		return p.JSON(out)
	}
	return writeStat(p, out)
}

func writeStat(p printer, s statOut) error {
	t := newTable()
	t.add("path:", s.Path)
	t.add("ref:", s.Ref)
	t.add("size:", fmt.Sprintf("%s (%d bytes)", humanBytes(s.Size), s.Size))
	t.add("checksum:", s.Checksum)
	t.add("modified:", formatTime(s.Mtime))
	if s.ContentType != "" {
		t.add("content type:", s.ContentType)
	}
	var user []string
	for _, k := range slices.Sorted(maps.Keys(s.Metadata)) {
		if !strings.HasPrefix(k, "rlpipe-") {
			user = append(user, k)
		}
	}
	if len(user) > 0 {
		t.add("metadata:", "")
		for _, k := range user {
			t.add("  "+k+":", s.Metadata[k])
		}
	}
	switch {
	case s.Provenance != nil:
		pv := s.Provenance
		t.add("provenance:", "")
		task := pv.Task
		if pv.TaskVersion != "" {
			task += " " + pv.TaskVersion
		}
		t.add("  task:", task)
		if pv.ConfigHash != "" {
			t.add("  config hash:", pv.ConfigHash)
		}
		if pv.PolicyVersion != "" {
			t.add("  policy version:", pv.PolicyVersion)
		}
		if pv.Seed != nil {
			t.add("  seed:", fmt.Sprint(*pv.Seed))
		}
		if !pv.CreatedAt.IsZero() {
			t.add("  created:", formatTime(pv.CreatedAt))
		}
		if len(pv.Inputs) > 0 {
			names := make([]string, 0, len(pv.Inputs))
			for k := range pv.Inputs {
				names = append(names, k)
			}
			sort.Strings(names)
			t.add("  inputs:", "")
			for _, k := range names {
				t.add("    "+k, pv.Inputs[k])
			}
		}
	default:
		t.add("provenance:", "none (imported, not produced by a task)")
	}
	if s.ProvenanceError != "" {
		t.add("", "warning: "+s.ProvenanceError)
	}
	return t.write(p.w)
}
