package generator

import (
	"context"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

const publishSpec = `openapi: 3.0.3
info: {title: shop, version: "2"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: true
      responses:
        "201": {description: created}
  /carts:
    post:
      operationId: createCart
      x-idempotent: {key: {query: key}, required: false}
      responses:
        "200": {description: ok}
        "422":
          description: The cart is invalid.
          content:
            application/json:
              schema: {type: object}
        "409":
          description: taken
          content:
            application/problem+json:
              schema: {type: object}
          headers:
            Retry-After: {schema: {type: integer}}
        "5XX": {description: failed}
      callbacks:
        onDone:
          $ref: '#/components/callbacks/Done'
components:
  callbacks:
    Done:
      '{$request.body#/url}':
        post:
          x-idempotent: {key: {fields: [id]}, ttl: 90m}
          requestBody:
            content:
              application/json:
                schema: {type: object, properties: {id: {type: string}}}
          responses:
            "204": {description: ok}
`

func TestPublishMergesAndLeaves(t *testing.T) {
	ctx := context.Background()
	pub, err := Publish(ctx, Config{Spec: "shop.yaml", SpecData: []byte(publishSpec)}, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notes := pub.Notes.Error()
	for _, want := range []string{
		"shop.yaml:16:9: note: POST /carts (createCart) 422: the spec defines this response: merged (added the idempotency layer's description and application/problem+json)",
		"shop.yaml:21:9: note: POST /carts (createCart) 409: the spec defines this response: merged (added the idempotency layer's description)",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(pub.Data)
	if err != nil {
		t.Fatalf("%v\n%s", err, pub.Data)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("%v\n%s", err, pub.Data)
	}
	cart := doc.Paths.Value("/carts").Post
	if p := cart.Parameters.GetByInAndName("query", "key"); p == nil || p.Required || p.Schema.Value.MaxLength == nil || *p.Schema.Value.MaxLength != 255 {
		t.Errorf("the optional query key parameter is missing or wrong: %+v", p)
	}
	if r := cart.Responses.Value("422").Value; r.Content.Get("application/json") == nil || r.Content.Get("application/problem+json") == nil {
		t.Errorf("422 was not merged: %+v", r.Content)
	}
	// The business 409 and the wrapper's "in progress" 409 share the
	// status: the published description says both.
	if d := *cart.Responses.Value("409").Value.Description; !strings.HasPrefix(d, "taken\n\nIdempotency: A request with the same idempotency key is still in progress") {
		t.Errorf("409's description was not merged: %q", d)
	}
	republished, err := Publish(ctx, Config{Spec: "shop.yaml", SpecData: pub.Data}, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const inProgress = "Idempotency: A request with the same idempotency key is still in progress"
	if got, want := strings.Count(string(republished.Data), inProgress), strings.Count(string(pub.Data), inProgress); got != want {
		t.Errorf("publishing the published spec: %d in-progress descriptions, want %d (merged again)", got, want)
	}
	if r := cart.Responses.Value("5XX").Value; r.Headers["Idempotent-Replayed"] != nil {
		t.Errorf("5XX is not saved by default, but got Idempotent-Replayed")
	}
	if r := cart.Responses.Value("200").Value; r.Headers["Idempotent-Replayed"] == nil {
		t.Errorf("200 is saved, but has no Idempotent-Replayed")
	}
	if r := cart.Responses.Value("401"); r != nil {
		t.Errorf("an anonymous operation got a 401")
	}
	order := doc.Paths.Value("/orders").Post
	if order.Parameters.GetByInAndName("header", "Idempotency-Key") == nil || order.Responses.Value("503").Value.Headers["Retry-After"] == nil {
		t.Errorf("createOrder was not published")
	}
	if got := order.Extensions["x-idempotent"]; !sameJSON(got, map[string]any{"key": map[string]any{"header": "Idempotency-Key"}, "required": true, "scope": "createOrder", "principal": "anonymous", "ttl": "24h"}) {
		t.Errorf("x-idempotent: true became %v", got)
	}
	// The callback behind a $ref is published where it is.
	cb := (*cart.Callbacks["onDone"].Value.Value("{$request.body#/url}")).Post
	if got := cb.Extensions["x-idempotent"].(map[string]any); got["ttl"] != "90m" || got["scope"] != "CreateCartOnDonePost" || cb.Responses.Value("422") == nil {
		t.Errorf("callback: x-idempotent %v", got)
	}

	// Publishing the published spec changes nothing.
	again, err := Publish(ctx, Config{Spec: "shop.yaml", SpecData: pub.Data}, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Data) != string(pub.Data) {
		t.Errorf("publishing twice changed the spec:\n%s", again.Data)
	}
}

func sameJSON(a any, b map[string]any) bool {
	m, ok := a.(map[string]any)
	if !ok || len(m) != len(b) {
		return false
	}
	for k, v := range b {
		if vm, ok := v.(map[string]any); ok {
			if !sameJSON(m[k], vm) {
				return false
			}
			continue
		}
		if m[k] != v {
			return false
		}
	}
	return true
}

// An unannotated operation, and one marked x-idempotent: false, are left
// exactly as they are; a spec without annotations is written unchanged.
func TestPublishLeavesUnannotated(t *testing.T) {
	spec := "openapi: 3.0.3\ninfo:\n  title: t\n  version: \"1\"\npaths:\n  /a:\n    post:\n      x-idempotent: false\n      responses:\n        \"200\":\n          description: ok\n  /b:\n    put:\n      responses:\n        \"200\":\n          description: ok\n"
	pub, err := Publish(context.Background(), Config{Spec: "t.yaml", SpecData: []byte(spec)}, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(pub.Data) != spec {
		t.Errorf("changed:\n%s", pub.Data)
	}
}

// TestPublishRequiresOptionalKey: a key parameter the spec declares
// optional while the annotation requires it is published as required,
// once for a shared component, with a note at each operation; one the
// annotation makes optional is left as is.
func TestPublishRequiresOptionalKey(t *testing.T) {
	const spec = `openapi: 3.0.3
info: {title: keys, version: "1"}
paths:
  /payments:
    post:
      operationId: createPayment
      x-idempotent: true
      parameters:
        - $ref: '#/components/parameters/Key'
      responses:
        "201": {description: created}
  /refunds:
    post:
      operationId: createRefund
      x-idempotent: true
      parameters:
        - $ref: '#/components/parameters/Key'
      responses:
        "201": {description: created}
  /orders:
    post:
      operationId: createOrder
      x-idempotent: {key: {header: X-Order-Key}}
      parameters:
        - {name: X-Order-Key, in: header, schema: {type: string}}
      responses:
        "201": {description: created}
  /carts:
    post:
      operationId: createCart
      x-idempotent: {required: false}
      parameters:
        - {name: Idempotency-Key, in: header, required: false, schema: {type: string}}
      responses:
        "201": {description: created}
components:
  parameters:
    Key: {name: Idempotency-Key, in: header, required: false, schema: {type: string}}
`
	pub, err := Publish(context.Background(), Config{Spec: "keys.yaml", SpecData: []byte(spec)}, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(pub.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.Components.Parameters["Key"].Value.Required {
		t.Errorf("the shared key parameter was not published as required")
	}
	if p := doc.Paths.Value("/orders").Post.Parameters.GetByInAndName("header", "X-Order-Key"); p == nil || !p.Required {
		t.Errorf("the inline key parameter was not published as required: %+v", p)
	}
	if p := doc.Paths.Value("/carts").Post.Parameters.GetByInAndName("header", "Idempotency-Key"); p == nil || p.Required {
		t.Errorf("the optional key of required: false was changed: %+v", p)
	}
	n := 0
	for _, d := range pub.Notes {
		if strings.Contains(d.Msg, "published as required") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d notes of a parameter published as required, want 2 (the component once, the inline one):\n%v", n, pub.Notes)
	}
	if len(pub.Warnings) != 2 {
		t.Errorf("warnings %v, want 2 (one per declaration)", pub.Warnings)
	}
}
