package basepath

// The servers of the spec say https://api.example.com/v1, but the router of
// this case serves the spec's paths at the root, as oapi-codegen's
// HandlerFromMux and ogen's NewServer (without WithPathPrefix) do:
// -base-path / generates policies that match the root.

//go:generate go run github.com/idemgen/idemgen/cmd/idemgen generate -spec openapi.yaml -out . -package basepath -store=false -base-path /
