package main

import (
	"strings"
	"testing"
)

const routesSpec = `openapi: 3.1.0
info: {title: t, version: "1"}
servers:
  - url: https://api.example.com/v1
  - url: https://eu.example.com/v2/
components:
  securitySchemes:
    bearer: {type: http, scheme: bearer}
paths:
  /charges:
    post:
      operationId: createCharge
      security: [{bearer: []}]
      x-idempotent:
        lease: 10s
        transactional: true
      responses: {"201": {description: ok}}
  /refunds/{id}:
    put:
      operationId: putRefund
      x-idempotent:
        key: {fields: [charge, amount]}
        required: false
        ttl: 90m
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties: {charge: {type: string}, amount: {type: integer}}
      responses: {"200": {description: ok}}
    delete:
      operationId: deleteRefund
      x-idempotent: false
      responses: {"204": {description: ok}}
  /refunds:
    delete:
      operationId: deleteRefunds
      x-idempotent: {opt-out: a repeat answers 204 again}
      responses: {"204": {description: ok}}
webhooks:
  paid:
    post:
      operationId: paidHook
      x-idempotent: {key: {header: Webhook-Id}}
      responses: {"200": {description: ok}}
`

func TestRoutesTable(t *testing.T) {
	spec := writeSpec(t, t.TempDir(), routesSpec)
	code, out, errs := runCLI(t, "", "routes", "-spec", spec)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	want := `OPERATION      METHOD  PATH                               KEY                                    PRINCIPAL  TTL    LEASE  TRANSACTIONAL
createCharge   POST    /v1/charges /v2/charges            header Idempotency-Key                 auth       24h    10s    yes
paidHook       POST    webhook paid (WrapPaidHook)        header Webhook-Id                      anonymous  24h    1m     no
putRefund      PUT     /v1/refunds/{id} /v2/refunds/{id}  fields charge,amount (optional)        anonymous  1h30m  1m     no
deleteRefunds  DELETE  /refunds                           opted out: a repeat answers 204 again  -          -      -      -
deleteRefund   DELETE  /refunds/{id}                      opted out (x-idempotent: false)        -          -      -      -
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestRoutesMarkdown(t *testing.T) {
	code, out, errs := runCLI(t, routesSpec, "routes", "-spec", "-", "-markdown")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	want := "| operation | method | path | key | principal | ttl | lease | transactional |\n" +
		"|---|---|---|---|---|---|---|---|\n" +
		"| createCharge | POST | `/v1/charges`<br>`/v2/charges` | header Idempotency-Key | auth | 24h | 10s | yes |\n" +
		"| paidHook | POST | webhook paid (WrapPaidHook) | header Webhook-Id | anonymous | 24h | 1m | no |\n" +
		"| putRefund | PUT | `/v1/refunds/{id}`<br>`/v2/refunds/{id}` | fields charge,amount (optional) | anonymous | 1h30m | 1m | no |\n" +
		"| deleteRefunds | DELETE | `/refunds` | opted out: a repeat answers 204 again | - | - | - | - |\n" +
		"| deleteRefund | DELETE | `/refunds/{id}` | opted out (x-idempotent: false) | - | - | - | - |\n"
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestRoutesErrors(t *testing.T) {
	if code, _, errs := runCLI(t, "", "routes"); code != 2 || !strings.Contains(errs, "want -spec FILE") {
		t.Errorf("no -spec: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "routes", "-h"); code != 0 || !strings.Contains(errs, "-markdown") {
		t.Errorf("-h: exit %d, stderr %q", code, errs)
	}
	bad := strings.Replace(routesSpec, "lease: 10s", "lease: soon", 1)
	if code, out, errs := runCLI(t, bad, "routes", "-spec", "-"); code != 1 || out != "" || !strings.Contains(errs, `<stdin>:`) || !strings.Contains(errs, "soon") {
		t.Errorf("bad spec: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runCLI(t, spec[:strings.Index(spec, "      x-idempotent")]+"      responses: {\"200\": {description: ok}}\n", "routes", "-spec", "-"); code != 0 || out != "" || !strings.Contains(errs, "no operation") {
		t.Errorf("nothing annotated: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
