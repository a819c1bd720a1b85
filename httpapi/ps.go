package httpapi

import (
	"math"
	"time"

	"github.com/valyala/fasthttp"
)

// RunningModels is GET /api/ps's answer: the loaded models, in the shape
// of Ollama's /api/ps, so that tools written for Ollama list them; `ringlm
// ps` reads it from every server on the machine.
type RunningModels struct {
	Models []RunningModel `json:"models"`
}

// RunningModel is one loaded model: Ollama's fields, then ringlm's.
type RunningModel struct {
	Name          string       `json:"name"`
	Model         string       `json:"model"`
	Size          int64        `json:"size"`
	Digest        string       `json:"digest"`
	Details       ModelDetails `json:"details"`
	ExpiresAt     time.Time    `json:"expires_at"`
	SizeVRAM      int64        `json:"size_vram"`
	ContextLength int          `json:"context_length"`

	Device   string    `json:"device"` // Engine.DeviceName: "cpu (…)", "cuda (NVIDIA H100 …)"
	LoadedAt time.Time `json:"loaded_at"`
}

// ModelDetails are Ollama's details of a model.
type ModelDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

// neverExpires is expires_at of a loaded model: ringlm unloads a model
// only to load another or when it stops, never on a timer. Ollama reports
// a keep_alive of -1 the same way (now plus the longest duration), and
// its ps shows it as "Forever".
const neverExpires = time.Duration(math.MaxInt64)

// ps is GET /api/ps.
func (s *Server) ps(ctx *fasthttp.RequestCtx, r *req) {
	out := RunningModels{Models: []RunningModel{}}
	if l := s.current(); l != nil {
		m, info := l.m, l.m.Info
		loadedAt := time.Unix(m.Created, 0) // when serve built it, just loaded
		name := m.Name
		if l.name != "" {
			name = l.name
		}
		family := []string{}
		if info.Family != "" {
			family = append(family, info.Family)
		}
		out.Models = append(out.Models, RunningModel{Name: name, Model: name, Size: info.Size, SizeVRAM: info.SizeVRAM,
			Digest: info.Digest, ExpiresAt: loadedAt.Add(neverExpires), ContextLength: m.Context,
			Details: ModelDetails{Format: "gguf", Family: info.Family, Families: family, ParameterSize: info.ParameterSize,
				QuantizationLevel: info.QuantizationLevel},
			Device: m.Engine.DeviceName(), LoadedAt: loadedAt})
		l.release()
	}
	b, err := marshal(out)
	if err != nil {
		writeError(ctx, internalError(err))
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
