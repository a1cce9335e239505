module github.com/idemgen/idemgen/examples/ledger

go 1.26.0

require (
	github.com/idemgen/idemgen v0.0.0
	github.com/idemgen/idemgen/adapters/amqpidem v0.0.0
	github.com/idemgen/idemgen/adapters/natsidem v0.0.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/nats-io/nats.go v1.55.0
	github.com/rabbitmq/amqp091-go v1.16.0
)

require (
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/getkin/kin-openapi v0.153.0 // indirect
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

tool github.com/idemgen/idemgen/cmd/idemgen

replace (
	github.com/idemgen/idemgen => ../..
	github.com/idemgen/idemgen/adapters/amqpidem => ../../adapters/amqpidem
	github.com/idemgen/idemgen/adapters/natsidem => ../../adapters/natsidem
)
