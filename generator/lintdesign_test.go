package generator

import (
	"context"
	"strings"
	"testing"
)

const streamingSpec = `openapi: 3.0.3
info: {title: s, version: "1"}
paths:
  /chat:
    post:
      operationId: chat
      responses:
        "200":
          description: tokens
          content:
            text/event-stream; charset=utf-8:
              schema: {type: string}
  /orders:
    post:
      operationId: createOrder
      responses:
        "201": {description: created}
`

// -annotate-mutating leaves a streaming operation out, with a warning,
// instead of failing on the user's blanket flag.
func TestAnnotateMutatingSkipsStreams(t *testing.T) {
	res, err := Generate(context.Background(), Config{Spec: "s.yaml", SpecData: []byte(streamingSpec), Package: "p", SkipStore: true, AnnotateMutating: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Model.Operations) != 1 || res.Model.Operations[0].ID() != "createOrder" {
		t.Fatalf("annotated %v, want createOrder alone", res.Model.Operations)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Msg, "POST /chat (chat) left unannotated: its 200 response streams (text/event-stream)") {
		t.Fatalf("warnings %v", res.Warnings)
	}
}
