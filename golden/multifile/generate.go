package multifile

// The golden case is generated the way a user generates: go generate ./golden/...
// (or go test ./cmd/idemgen -update) rewrites it, and the test in cmd/idemgen checks it.

//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate -spec openapi.yaml -out . -package multifile -store=false
