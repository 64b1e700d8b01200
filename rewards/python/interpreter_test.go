package python_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rlpipe/rlpipe/rewards/python"
	"github.com/rlpipe/rlpipe/rewards/python/pythontest"
)

func TestFind(t *testing.T) {
	needPython(t)
	in, err := python.Find(context.Background(), systemPython)
	if err != nil {
		t.Fatal(err)
	}
	if in.Command != systemPython || len(in.Binds) != 0 || len(in.Mounts) != 0 {
		t.Fatalf("%s: %+v, want it run as is, with nothing to bind beyond /usr", systemPython, in)
	}
	venv := pythontest.FakeVenv(t, systemPython)
	in, err = python.Find(context.Background(), venv)
	if err != nil {
		t.Fatal(err)
	}
	want := python.Interpreter{Host: filepath.Join(venv, "bin", "python3"), Command: "/python/venv/bin/python3",
		Version: in.Version, Mounts: map[string]string{"/python/venv": venv}}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("the venv: got %+v\nwant %+v", in, want)
	}
	if err := os.Remove(filepath.Join(venv, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	_, err = python.Find(context.Background(), venv)
	if wantErr := "python " + venv + ": a directory without bin/python3, so not a venv: python interpreter not usable"; !errors.Is(err, python.ErrInterpreter) || err.Error() != wantErr {
		t.Fatalf("a directory that is no venv: %v\nwant %s", err, wantErr)
	}
}
