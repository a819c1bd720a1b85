package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"ringlm/engine"
	"ringlm/sample"
)

// apiError is an error answered in OpenAI's shape:
// {"error":{"message","type","param","code"}}.
type apiError struct {
	Status  int
	Type    string
	Message string
	Param   string
	Code    string
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

var (
	errUnauthorized = &apiError{Status: fasthttp.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "missing or incorrect API key: send 'Authorization: Bearer <key>'"}
	errLoading   = &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "model_loading", Message: "the model is still loading; retry shortly"}
	errDraining  = &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down", Message: "the server is shutting down"}
	errQueueFull = &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "queue_full", Message: "too many requests are waiting; retry later"}
	errTooLarge  = &apiError{Status: fasthttp.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large"}
	errNotFound  = &apiError{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "not_found", Message: "no such endpoint"}
)

// errModelNotFound names the models served, so that the one line says
// what to ask for instead.
func errModelNotFound(name string, served []string) *apiError {
	q := make([]string, len(served))
	for i, n := range served {
		q[i] = strconv.Quote(n)
	}
	return &apiError{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: "the model " + strconv.Quote(name) + " does not exist; served: " + strings.Join(q, ", ")}
}

func errSwitchQueueFull(name string, max int) *apiError {
	return &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "queue_full",
		Message: itoa(max) + " requests are already waiting for a model switch; retry " + strconv.Quote(name) + " later"}
}

func internalError(err error) *apiError {
	return &apiError{Status: fasthttp.StatusInternalServerError, Type: "server_error", Code: "internal_error", Message: err.Error()}
}

// submitError classifies an engine.Submit error. Anything but a full queue
// or a closed engine is caused by the request.
func submitError(err error) *apiError {
	var pe *sample.ParamError
	var le *engine.LimitError
	switch {
	case errors.Is(err, engine.ErrQueueFull):
		return errQueueFull
	case errors.Is(err, engine.ErrClosed):
		return errDraining
	case errors.As(err, &pe):
		return badRequest(pe.Param, "%s: %s", pe.Param, pe.Reason)
	case errors.As(err, &le):
		// The request's fault: it asks for more than the device takes.
		return badRequest(le.Param, "%s: %d %s, the device takes at most %d", le.Param, le.N, le.What, le.Max)
	}
	return badRequest("", "%s", err.Error())
}

// decodeError turns a JSON decoding error into a message that names the
// field and the expected JSON type instead of Go's.
func decodeError(err error) *apiError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return badRequest("", "invalid JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("", "the request body must be a JSON object, got %s", te.Value)
		}
		return badRequest(te.Field, "invalid type for %q: expected %s, got %s", te.Field, jsonKind(te.Type), te.Value)
	case errors.Is(err, errEOF):
		return badRequest("", "the request body is empty; expected a JSON object")
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return badRequest("", "invalid request body: %s", err.Error())
}

var errEOF = errors.New("unexpected end of JSON input")

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a different type"
}

// appendError writes the OpenAI error object.
func appendError(b []byte, e *apiError) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendJSONString(b, e.Message)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"param":`...)
	b = appendNullString(b, e.Param)
	b = append(b, `,"code":`...)
	b = appendNullString(b, e.Code)
	return append(b, "}}"...)
}

func appendNullString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

func writeError(ctx *fasthttp.RequestCtx, e *apiError) {
	ctx.Response.ResetBody()
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	if e.Status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	if e.Status == fasthttp.StatusUnauthorized {
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
	}
	ctx.SetBody(appendError(nil, e))
}
