package templates

import "errors"

var errNotYet = errors.New("templates: not implemented yet")
