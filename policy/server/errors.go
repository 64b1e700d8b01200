package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// apiError is an OpenAI error: the body {"error": {"message", "type",
// "param", "code"}} and its HTTP status.
type apiError struct {
	status  int
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"` // the offending field, or null
	Code    any    `json:"code"`  // a string such as "model_not_found", or null
}

func (e *apiError) Error() string { return e.Message }

// writeError writes e as the answer. An e whose Param or Code does not
// encode is answered with a 500 that says so, which holds only strings
// and so encodes.
func writeError(w http.ResponseWriter, e *apiError) {
	b, err := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e})
	if err != nil {
		writeError(w, errInternal("encode the error answer: "+err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.status)
	w.Write(b)
}

// badRequest is a 400 about field param ("" for the whole body).
func badRequest(param, format string, args ...any) *apiError {
	e := &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = param
	}
	return e
}

func errInternal(msg string) *apiError {
	return &apiError{status: http.StatusInternalServerError, Type: "server_error", Message: msg}
}

func modelNotFound(model, served string) *apiError {
	return &apiError{status: http.StatusNotFound, Type: "not_found_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` does not exist: this server serves %s; load an adapter with POST /v1/load_lora_adapter", model, served)}
}

// readJSON reads a body of at most max bytes into v. A syntax error names
// its byte offset; a field of the wrong type names the field.
func readJSON(w http.ResponseWriter, r *http.Request, max int64, v any) *apiError {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: fmt.Sprintf("request body is larger than %d bytes; send fewer prompts per request", max)}
		}
		return badRequest("", "read request body: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return badRequest("", "invalid JSON at byte %d of %d: %v", se.Offset, len(b), err)
		case errors.As(err, &te):
			if te.Field == "" {
				return badRequest("", "the body must be a JSON object, got %s at byte %d", te.Value, te.Offset)
			}
			return badRequest(te.Field, "field %q must be %s, got %s at byte %d", te.Field, typeName(te.Type.String()), te.Value, te.Offset)
		}
		return badRequest("", "invalid JSON (%d bytes): %v", len(b), err)
	}
	return nil
}

// typeName says a Go type in JSON's words.
func typeName(t string) string {
	switch t {
	case "string":
		return "a string"
	case "int", "int32", "int64", "*int", "*int64":
		return "an integer"
	case "float64", "*float64":
		return "a number"
	case "bool":
		return "true or false"
	}
	return "of another type (" + t + ")"
}
