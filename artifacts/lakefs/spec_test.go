package lakefs

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/rlpipe/rlpipe/artifacts/internal/lakefsapi"
)

// EnvSpec names the lakeFS OpenAPI document (lakefs-swagger.yml of the
// server version the store targets) for TestAgainstSpec.
const EnvSpec = "RLPIPE_LAKEFS_SPEC"

// specPath finds the OpenAPI document: $RLPIPE_LAKEFS_SPEC, else a shared
// reference checkout beside the repository. "" when neither exists.
func specPath() string {
	if p := os.Getenv(EnvSpec); p != "" {
		return p
	}
	p := filepath.Join("..", "..", "..", "shared", "reference", "lakefs-swagger.yml")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// spec is the part of an OpenAPI document the test reads: every key path
// ("paths\x00/repositories\x00get") and the text of each path's block.
type spec struct {
	keys   map[string]bool
	blocks map[string]string
}

var yamlKey = regexp.MustCompile(`^( *)(- )?([^\s#-][^:]*?|-[^\s:][^:]*?):(?: |$)`)

// parseSpec reads YAML keys by indentation. It is not a YAML parser, but
// an OpenAPI document written by hand is regular enough for it.
func parseSpec(text string) spec {
	s := spec{keys: map[string]bool{}, blocks: map[string]string{}}
	type frame struct {
		indent int
		key    string
	}
	var stack []frame
	var block strings.Builder
	current := ""
	for _, line := range strings.Split(text, "\n") {
		if current != "" && (strings.HasPrefix(line, "    ") || strings.TrimSpace(line) == "") {
			block.WriteString(line + "\n")
		}
		m := yamlKey.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		indent := len(m[1]) + len(m[2])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, frame{indent, strings.Trim(m[3], `"'`)})
		var path []string
		for _, f := range stack {
			path = append(path, f.key)
		}
		s.keys[strings.Join(path, "\x00")] = true
		if len(path) == 2 && path[0] == "paths" {
			if current != "" {
				s.blocks[current] = block.String()
			}
			current = path[1]
			block.Reset()
		} else if len(path) == 1 && current != "" {
			s.blocks[current] = block.String()
			current = ""
		}
	}
	if current != "" {
		s.blocks[current] = block.String()
	}
	return s
}

func (s spec) has(path ...string) bool { return s.keys[strings.Join(path, "\x00")] }

// paramRefs are the shared parameters of the document that the client's
// parameters are declared through.
var paramRefs = map[string]string{
	"after":         "#/components/parameters/PaginationAfter",
	"amount":        "#/components/parameters/PaginationAmount",
	"prefix":        "#/components/parameters/PaginationPrefix",
	"delimiter":     "#/components/parameters/PaginationDelimiter",
	"If-None-Match": "#/components/parameters/IfNoneMatch",
}

// wireSchemas maps each JSON body type the client sends or reads to its
// schema in the document.
var wireSchemas = map[string]any{
	"Repository":          lakefsapi.Repository{},
	"RepositoryCreation":  lakefsapi.RepositoryCreation{},
	"Ref":                 lakefsapi.Ref{},
	"BranchCreation":      lakefsapi.BranchCreation{},
	"TagCreation":         lakefsapi.TagCreation{},
	"ResetCreation":       lakefsapi.ResetCreation{},
	"Commit":              lakefsapi.Commit{},
	"CommitCreation":      lakefsapi.CommitCreation{},
	"Merge":               lakefsapi.Merge{},
	"MergeResult":         lakefsapi.MergeResult{},
	"FindMergeBaseResult": lakefsapi.FindMergeBaseResult{},
	"CommitOverrides":     lakefsapi.CommitOverrides{},
	"RevertCreation":      lakefsapi.RevertCreation{},
	"ObjectStats":         lakefsapi.ObjectStats{},
	"ObjectCopyCreation":  lakefsapi.ObjectCopyCreation{},
	"Diff":                lakefsapi.Diff{},
	"Pagination":          lakefsapi.Pagination{},
	"StagingLocation":     lakefsapi.StagingLocation{},
	"StagingMetadata":     lakefsapi.StagingMetadata{},
	"StorageConfig":       lakefsapi.StorageConfig{},
	"Config":              lakefsapi.Config{},
}

// TestAgainstSpec checks every method and path the client uses, their
// parameters and the field names of every body against the lakeFS OpenAPI
// document. It needs the document (see specPath) and skips without it.
func TestAgainstSpec(t *testing.T) {
	p := specPath()
	if p == "" {
		t.Skipf("no lakeFS OpenAPI document: set %s to lakefs-swagger.yml to run this test", EnvSpec)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read the OpenAPI document: %v", err)
	}
	s := parseSpec(string(b))
	if !s.has("paths", "/repositories", "post") {
		t.Fatalf("%s: does not look like the lakeFS OpenAPI document", p)
	}
	for _, e := range endpoints {
		if !s.has("paths", e.path, strings.ToLower(e.method)) {
			t.Errorf("%s %s: not in the document", e.method, e.path)
			continue
		}
		block := s.blocks[e.path]
		for _, param := range e.params {
			declared := strings.Contains(block, "name: "+param+"\n")
			if ref, ok := paramRefs[param]; ok {
				declared = declared || strings.Contains(block, `$ref: "`+ref+`"`)
			}
			if !declared {
				t.Errorf("%s %s: parameter %s not declared", e.method, e.path, param)
			}
		}
	}
	for schema, v := range wireSchemas {
		if !s.has("components", "schemas", schema) {
			t.Errorf("schema %s: not in the document", schema)
			continue
		}
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if !s.has("components", "schemas", schema, "properties", name) {
				t.Errorf("%s.%s (%s): the schema has no property %q", rt.Name(), rt.Field(i).Name, schema, name)
			}
		}
	}
}

func TestParseSpec(t *testing.T) {
	s := parseSpec(`openapi: "3.0.0"
components:
  schemas:
    Ref:
      type: object
      properties:
        id:
          type: string
        commit_id:
          description: |
            not: a key of the schema
          type: string
paths:
  /repositories/{repository}/tags:
    parameters:
      - in: path
        name: repository
    get:
      parameters:
        - $ref: "#/components/parameters/PaginationAfter"
  /healthcheck:
    get:
      summary: x
`)
	for _, want := range [][]string{
		{"components", "schemas", "Ref", "properties", "id"},
		{"components", "schemas", "Ref", "properties", "commit_id"},
		{"paths", "/repositories/{repository}/tags", "get"},
		{"paths", "/healthcheck", "get"},
	} {
		if !s.has(want...) {
			t.Errorf("missing key %q", want)
		}
	}
	if s.has("components", "schemas", "Ref", "properties", "type") {
		t.Errorf("a property's attribute read as a property")
	}
	if b := s.blocks["/repositories/{repository}/tags"]; !strings.Contains(b, "PaginationAfter") || strings.Contains(b, "summary") {
		t.Errorf("tags block: %q", b)
	}
}
