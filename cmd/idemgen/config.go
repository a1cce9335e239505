package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v4"
)

// configFile is read from the current folder when generate, lint or
// routes get no -spec:
//
//	version: 1
//	spec: api/openapi.yaml
//	outputs:
//	  - out: internal/idem
//	    package: idem
//	    dialect: postgres
//	  - out: internal/idemlite
//	    dialect: sqlite
//	    table: request_keys
//	    base-path: [/]
//
// Each key of an output is the generate flag of that name; base-path is
// one path or a list, allow-remote-refs (at the top: it is about reading
// the spec) also applies to lint and routes. Paths are relative to the
// file's folder (the current one). Flags given on the command line
// replace the file's values, in every output.
const configFile = "idemgen.yaml"

// fileConfig is idemgen.yaml.
type fileConfig struct {
	Version         int          `yaml:"version"`
	Spec            string       `yaml:"spec"`
	AllowRemoteRefs bool         `yaml:"allow-remote-refs"`
	Outputs         []fileOutput `yaml:"outputs"`
}

// fileOutput is one generated package: the flags of one generate run.
type fileOutput struct {
	Out     string `yaml:"out"`
	Package string `yaml:"package"`
	Dialect string `yaml:"dialect"`
	Table   string `yaml:"table"`
	Store   *bool  `yaml:"store"`
	// AnnotateMutating is true or an object, as -annotate-mutating.
	AnnotateMutating any `yaml:"annotate-mutating"`
	// BasePath is -base-path, repeated: one path or a list.
	BasePath stringList `yaml:"base-path"`
}

// stringList is a YAML list of strings, or one string.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = stringList{n.Value}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*l = list
	return nil
}

// readConfig reads idemgen.yaml from the current folder; ok is false when
// there is none.
func readConfig() (cfg *fileConfig, ok bool, err error) {
	data, err := os.ReadFile(configFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	cfg, err = parseConfig(data)
	return cfg, true, err
}

func parseConfig(data []byte) (*fileConfig, error) {
	var c fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty; want the fields version (1), spec and outputs", configFile)
		}
		return nil, fmt.Errorf("%s: %w", configFile, err)
	}
	var errs []error
	if c.Version != 1 {
		errs = append(errs, fmt.Errorf("%s: version %d, want version: 1", configFile, c.Version))
	}
	if c.Spec == "" {
		errs = append(errs, fmt.Errorf("%s: no spec: (the OpenAPI document)", configFile))
	}
	for i, o := range c.Outputs {
		if o.Out == "" {
			errs = append(errs, fmt.Errorf("%s: outputs[%d]: no out: (the folder of the generated package)", configFile, i))
		}
		if _, err := o.annotateFlag(); err != nil {
			errs = append(errs, fmt.Errorf("%s: outputs[%d]: %w", configFile, i, err))
		}
	}
	return &c, errors.Join(errs...)
}

// annotateFlag is the -annotate-mutating value of o ("" for none).
func (o fileOutput) annotateFlag() (string, error) {
	switch v := o.AnnotateMutating.(type) {
	case nil:
		return "", nil
	case bool:
		if v {
			return "true", nil
		}
		return "", nil
	case map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("annotate-mutating: %w", err)
		}
		return string(b), nil
	}
	return "", fmt.Errorf("annotate-mutating: want true or an object, got %v", o.AnnotateMutating)
}

// args are the generate flags of output o of c, but for those in set
// (given on the command line, which replace them).
func (c *fileConfig) args(o fileOutput, set map[string]bool) []string {
	var args []string
	add := func(name string, values ...string) {
		if set[name] {
			return
		}
		for _, v := range values {
			args = append(args, "-"+name+"="+v)
		}
	}
	add("spec", c.Spec)
	add("out", o.Out)
	if c.AllowRemoteRefs {
		add("allow-remote-refs", "true")
	}
	if o.Package != "" {
		add("package", o.Package)
	}
	if o.Dialect != "" {
		add("dialect", o.Dialect)
	}
	if o.Table != "" {
		add("table", o.Table)
	}
	if o.Store != nil {
		add("store", strconv.FormatBool(*o.Store))
	}
	if a, _ := o.annotateFlag(); a != "" {
		add("annotate-mutating", a)
	}
	add("base-path", o.BasePath...)
	return args
}

// generateFromConfig runs generate once per output of idemgen.yaml, with
// args (the command line, which has no -spec) overriding the file. ok is
// false when there is no idemgen.yaml.
func generateFromConfig(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, ok bool) {
	cfg, ok, err := readConfig()
	if !ok {
		return 0, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
		return exitUsage, true
	}
	if len(cfg.Outputs) == 0 {
		fmt.Fprintf(stderr, "idemgen generate: %s lists no outputs\n", configFile)
		return exitUsage, true
	}
	fs, _ := generateFlags(io.Discard)
	_ = fs.Parse(args) // runGenerate reports a flag error
	set := given(fs)
	if set["spec"] {
		return 0, false // an explicit -spec, even empty, means no config
	}
	if set["out"] && len(cfg.Outputs) > 1 {
		fmt.Fprintf(stderr, "idemgen generate: %s has %d outputs; -out would write them all to one folder\n", configFile, len(cfg.Outputs))
		return exitUsage, true
	}
	code = exitOK
	for _, o := range cfg.Outputs {
		// Usage (2) outranks errors (1) outranks success (0).
		code = max(code, runGenerate(ctx, append(cfg.args(o, set), args...), stdin, stdout, stderr))
	}
	return code, true
}

// given is the set of flags fs parsed from the command line.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// specFromConfig sets *spec to the spec of idemgen.yaml, for lint and
// routes run without -spec, and turns *allowRemote on when the file says
// so; it leaves them, and returns nil, when there is no idemgen.yaml. It
// reports false after printing an error.
func specFromConfig(cmd string, spec *string, allowRemote *bool, stderr io.Writer) (*fileConfig, bool) {
	cfg, ok, err := readConfig()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return nil, false
	}
	if !ok {
		return nil, true
	}
	*spec = cfg.Spec
	*allowRemote = *allowRemote || cfg.AllowRemoteRefs
	return cfg, true
}

// shared returns the base-path and annotate-mutating values every output
// of c has, for routes, which shows the operations as generate protects
// them; an error when the outputs differ in one that is not in set (given
// on the command line).
func (c *fileConfig) shared(set map[string]bool) (basePaths []string, annotate string, err error) {
	for i, o := range c.Outputs {
		a, _ := o.annotateFlag()
		if i == 0 {
			basePaths, annotate = o.BasePath, a
			continue
		}
		if !set["base-path"] && !slices.Equal(basePaths, o.BasePath) {
			return nil, "", fmt.Errorf("the outputs of %s have different base-path values; pass -base-path", configFile)
		}
		if !set["annotate-mutating"] && a != annotate {
			return nil, "", fmt.Errorf("the outputs of %s have different annotate-mutating values; pass -annotate-mutating", configFile)
		}
	}
	return basePaths, annotate, nil
}
