// Package httpapi will own the fasthttp server: the OpenAI-compatible API
// with SSE, native endpoints, health, Prometheus metrics, request ids and
// limits. Filled by the HTTP API issue.
package httpapi
