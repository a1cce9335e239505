package redisstore

import (
	"strings"
	"testing"
)

// TestCheckVersion: New refuses a server older than Redis 7 (the scripts'
// flags need it) or one whose INFO reports no version. The servers the
// other tests start are 7.x, so this is where an older one is seen.
func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{"7.0.15": true, "7.2.4": true, "8.0.1": true, "6.2.14": false, "5.0.7": false, "": false, "x.y": false} {
		err := checkVersion("h:1", v)
		if (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v, want ok %v", v, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "Redis 7.0 or later") {
			t.Errorf("checkVersion(%q) = %v: the message does not say what is needed", v, err)
		}
	}
}
