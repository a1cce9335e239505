package webhooks31

// The golden case is generated the way a user generates: go generate ./golden/...
// (or go test ./cmd/idemgen -update) rewrites it, and the test in cmd/idemgen checks it.

//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate -spec openapi.json -out . -package webhooks31 -dialect sqlite
//go:generate go run github.com/idemgen/idemgen/cmd/idemgen spec -spec openapi.json -o published.json
//go:generate go run github.com/idemgen/idemgen/cmd/idemgen spec -spec openapi.json -overlay -o published.overlay.json
