package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"

	"github.com/rlpipe/rlpipe/policy"
)

// loraBody is the body of /v1/load_lora_adapter and
// /v1/unload_lora_adapter, as in vLLM.
type loraBody struct {
	Name string `json:"lora_name"`
	Path string `json:"lora_path"`
}

// models answers GET /v1/models: the base model, then the adapters loaded
// through the server, oldest first, with vLLM's root and parent fields.
func (s *Server) models(w http.ResponseWriter) {
	writeJSON(w, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", s.modelList()})
}

// modelOne answers GET /v1/models/{id}: the model as the list shows it,
// or OpenAI's 404 naming the id.
func (s *Server) modelOne(w http.ResponseWriter, id string) {
	for _, m := range s.modelList() {
		if m.ID == id {
			writeJSON(w, m)
			return
		}
	}
	s.amu.RLock()
	served := s.servedList()
	s.amu.RUnlock()
	writeError(w, modelNotFound(id, served))
}

// model is an entry of GET /v1/models, and GET /v1/models/{id}'s answer.
type model struct {
	ID      string  `json:"id"`
	Object  string  `json:"object"`
	Created int64   `json:"created"`
	OwnedBy string  `json:"owned_by"`
	Root    string  `json:"root"`
	Parent  *string `json:"parent"`
}

// modelList is the base model, then the adapters loaded through the
// server, oldest first.
func (s *Server) modelList() []model {
	s.amu.RLock()
	defer s.amu.RUnlock()
	data := []model{{ID: s.opts.Model, Object: "model", Created: s.created, OwnedBy: "rlpipe", Root: s.opts.Model}}
	for _, a := range s.adapters {
		data = append(data, model{ID: a.Name, Object: "model", Created: s.created, OwnedBy: "rlpipe", Root: a.Dir, Parent: &s.opts.Model})
	}
	return data
}

// loadAdapter answers POST /v1/load_lora_adapter. The messages follow
// vLLM's, so a client that treats "already been loaded" as success works
// with both.
func (s *Server) loadAdapter(w http.ResponseWriter, r *http.Request) {
	var b loraBody
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &b); e != nil {
		writeError(w, e)
		return
	}
	if b.Name == "" || b.Path == "" {
		writeError(w, badRequest("lora_name", "both lora_name and lora_path are required"))
		return
	}
	if s.loader == nil {
		writeError(w, &apiError{status: http.StatusNotFound, Type: "not_found_error",
			Message: "this policy does not load LoRA adapters"})
		return
	}
	if b.Name == s.opts.Model {
		writeError(w, badRequest("lora_name", "lora_name %q is the base model's name; choose another", b.Name))
		return
	}
	s.amu.Lock()
	defer s.amu.Unlock()
	for _, a := range s.adapters {
		if a.Name == b.Name {
			writeError(w, badRequest("lora_name", "The lora adapter '%s' has already been loaded.", b.Name))
			return
		}
	}
	if err := s.loader.LoadAdapter(r.Context(), b.Name, b.Path); err != nil {
		e := errInternal(fmt.Sprintf("load adapter %q from %s: %v", b.Name, b.Path, err))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			e = badRequest("lora_path", "load adapter %q: %v; the path is read by the server, so it must exist on the server's machine", b.Name, err)
		} else if errors.Is(err, policy.ErrAdapterShape) {
			e = badRequest("lora_path", "load adapter %q: %v", b.Name, err)
		}
		writeError(w, e)
		return
	}
	s.adapters = append(s.adapters, policy.LoadedAdapter{Name: b.Name, Dir: b.Path})
	s.log.Info().Str(logAdapter, b.Name).Str("dir", b.Path).Msg("adapter loaded")
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", b.Name))
}

// unloadAdapter answers POST /v1/unload_lora_adapter.
func (s *Server) unloadAdapter(w http.ResponseWriter, r *http.Request) {
	var b loraBody
	if e := readJSON(w, r, s.opts.MaxBodyBytes, &b); e != nil {
		writeError(w, e)
		return
	}
	if b.Name == "" {
		writeError(w, badRequest("lora_name", "lora_name is required"))
		return
	}
	s.amu.Lock()
	defer s.amu.Unlock()
	i := slices.IndexFunc(s.adapters, func(a policy.LoadedAdapter) bool { return a.Name == b.Name })
	if i < 0 || s.loader == nil {
		writeError(w, &apiError{status: http.StatusNotFound, Type: "not_found_error", Param: "lora_name",
			Message: fmt.Sprintf("The lora adapter '%s' cannot be found.", b.Name)})
		return
	}
	if err := s.loader.UnloadAdapter(r.Context(), b.Name); err != nil {
		writeError(w, errInternal(fmt.Sprintf("unload adapter %q: %v", b.Name, err)))
		return
	}
	s.adapters = slices.Delete(s.adapters, i, i+1)
	s.log.Info().Str(logAdapter, b.Name).Msg("adapter unloaded")
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", b.Name))
}

func writeText(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(msg))
}
