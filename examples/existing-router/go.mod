module github.com/idemgen/idemgen/examples/existing-router

go 1.26.0

require github.com/idemgen/idemgen v0.0.0

replace github.com/idemgen/idemgen => ../..
