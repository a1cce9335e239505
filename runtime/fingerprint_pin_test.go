package runtime_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	idemrt "github.com/idemgen/idemgen/runtime"
)

type fingerprintPin struct {
	name             string
	method, route    string
	params           []string
	ct               string
	body             []byte
	include, exclude []string
	ce               []string // Content-Encoding (version 3)
	want             string   // hex SHA-256, as the version under test wrote it
}

// fingerprintPinCases are fingerprints computed by FingerprintVersion 1
// when it was first released. Stored records carry these values: a change
// to any of them turns in-flight retries into 422s, so it needs a new
// FingerprintVersion, not a new pin.
func fingerprintPinCases() []fingerprintPin {
	return []fingerprintPin{
		{name: "json", method: "POST", route: "/v1/charges/{id}", params: []string{"ch_1"}, ct: "application/json",
			body: []byte(`{"b":[1,2.50,1e21,-0],"a":"x\u00e9\"\/","c":{"z":null,"y":true,"\u20ac":1,"\ud83d\ude00":2}}`), want: "c98ba4de2adb5521871ff3dc818d6b01727b3415383b94d405fa655039a67dd2"},
		{name: "json-1KiB", method: "POST", route: "/orders", ct: "application/json", body: jsonDoc(1 << 10), want: "cd9024f559b4c36bd1c6d59634cf22dde0db9289f8ee5ed87aa13920413035d1"},
		{name: "json-64KiB", method: "POST", route: "/orders", ct: "application/json", body: jsonDoc(64 << 10), want: "012c4c60dc1b2326ccd3e50b7a664c73d434eb223a90e8aa474a7e2962e2311b"},
		{name: "json-api-1KiB", method: "POST", route: "/v1/payments", ct: "application/json", body: apiDoc(1 << 10), want: "6ac54c52132cc2ee93208412a869b375d354f7217b39beedef64f35c4c9056f2"},
		{name: "json-exclude", method: "PUT", route: "/x/{a}/{b}", params: []string{"1", "2"}, ct: "application/merge-patch+json; charset=utf-8",
			body: []byte(`{"keep":[{"t":1,"drop":2}],"drop":3,"n":0.1}`), exclude: []string{"/drop", "/keep/0/drop"}, want: "827a3378ae0d50596efe6b5bab9ba38f680a088234dfb913a5815105c9d58fbc"},
		{name: "json-include", method: "POST", route: "/x", ct: "application/json",
			body: []byte(`{"amount":100,"currency":"eur","meta":{"b":1,"a":2},"noise":[1,2,3]}`), include: []string{"/meta", "/amount", "/missing"}, want: "f19064ddd2e5876ac93d8f1ba3b306fd1848e80da54ca74867b747bd932fac04"},
		{name: "invalid-json-raw", method: "POST", route: "/x", ct: "application/json", body: []byte(`{"a":1,"a":2}`), want: "2a8c890c6ef983f4c22987cdd60486beb680c66d81a898bd4664996017f2a66a"},
		{name: "form", method: "POST", route: "/x", ct: "application/x-www-form-urlencoded", body: []byte("b=2&a=1&a=0&c=%20"), want: "20a90c8e24566bdf186e3078eb2ddde5da6954bf6db7327de3a793f497958095"},
		{name: "raw", method: "POST", route: "/x", ct: "application/octet-stream", body: []byte{0, 1, 2, 0xff}, want: "5ac128d2ac4ae38263ee3caaed9d245a3270df84ddcd795195d7745c264f1700"},
	}
}

// TestFingerprintPinned pins the output bytes of FingerprintVersion 1, so
// that optimising the canonicaliser cannot silently change them: the
// runtime still computes them to compare records written by version 1.
func TestFingerprintPinned(t *testing.T) {
	for _, c := range fingerprintPinCases() {
		fp, err := idemrt.FingerprintAt(1, c.method, c.route, c.params, c.ct, c.body, c.include, c.exclude)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := hex.EncodeToString(fp[:]); got != c.want {
			t.Errorf("%s: fingerprint %s, want %s", c.name, got, c.want)
		}
	}
}

// fingerprintPinCasesV2 are fingerprints computed by FingerprintVersion 2
// when it was first released: the version 1 cases again, which keep their
// version 1 values (version 2 hashes an ordinary request as version 1 did)
// except the form whose repeated values are not in sorted order, and cases
// where the versions differ in substance (exact numbers, ordered form
// values, a form content type over a body that is not a form).
func fingerprintPinCasesV2() []fingerprintPin {
	cases := fingerprintPinCases()
	for i := range cases {
		if cases[i].name == "form" { // a=1&a=0: version 1 sorted the values
			cases[i].want = "27db6f420423b75c5b0790e096b90160ffb103914c14235d783e8810bc9e7ff7"
		}
	}
	return append(cases,
		fingerprintPin{name: "exact-numbers", method: "POST", route: "/x", ct: "application/json",
			body: []byte(`{"big":9007199254740993,"id":12345678901234567890123,"tiny":1e-400,"huge":-1.50e999999999,"z":-0.0}`), want: "b68d4a297423d010fcd83a31f9e49a48a41cc83d1d05b5e97a1b35d1d2ec0cc3"},
		fingerprintPin{name: "form-ordered", method: "POST", route: "/x", ct: "application/x-www-form-urlencoded", body: []byte("b=2&a=1&a=0&c=%20+"), want: "5b97cc6c2bb276f2bee8b1de57640f8243192457fd962ca942059a47ab857ce8"},
		fingerprintPin{name: "form-not-strict", method: "POST", route: "/x", ct: "application/x-www-form-urlencoded", body: []byte(`{"a":"&b=1&"}`), want: "717e85fe9ae31b735b78a59ff37faa5fc8d8ecd0eae10c483494845a8a9f2097"},
	)
}

// TestFingerprintPinnedV2 pins the output bytes of FingerprintVersion 2.
// Stored records carry these values: a change to any of them turns
// in-flight retries into 422s, so it needs a new FingerprintVersion, not a
// new pin.
func TestFingerprintPinnedV2(t *testing.T) {
	for _, c := range fingerprintPinCasesV2() {
		fp, err := idemrt.FingerprintAt(2, c.method, c.route, c.params, c.ct, c.body, c.include, c.exclude)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := hex.EncodeToString(fp[:]); got != c.want {
			t.Errorf("%s: fingerprint %s, want %s", c.name, got, c.want)
		}
	}
}

// fingerprintPinCasesV3 are fingerprints computed by FingerprintVersion 3
// when it was first released: the version 2 cases again, which keep their
// version 2 values (version 3 hashes an ordinary request as version 2 did)
// except those with numbers not written as their exact canonical text, and
// cases where the versions differ in substance (folded-equal member names,
// a Content-Encoding).
func fingerprintPinCasesV3() []fingerprintPin {
	cases := fingerprintPinCasesV2()
	for i := range cases {
		switch cases[i].name {
		case "json": // 2.50, 1e21, -0
			cases[i].want = "468832d94c8ce921d95dd545f3cd241a853d6ea1cb0c5d1b18d259228509bbe6"
		case "exact-numbers": // -1.50e999999999, -0.0
			cases[i].want = "39e31641378dc3202883e48adda9bf0f3c8b8939d5f3abd2203d41f074041970"
		}
	}
	return append(cases,
		fingerprintPin{name: "folded-names", method: "POST", route: "/x", ct: "application/json",
			body: []byte(`{"amount":1,"Amount":2}`), want: "344c346a7eeb66fd0db63d8c44ceb41a7599531e5fffe26773fbbcd3e8f14222"},
		fingerprintPin{name: "folded-kelvin", method: "POST", route: "/x", ct: "application/json",
			body: []byte(`{"x":[{"kind":1,"\u212aind":2}]}`), want: "51568ea28860edb6277012f2b1591df7b7a820226eb880f654b7978161c9e8b7"},
		fingerprintPin{name: "content-encoding", method: "POST", route: "/x", ct: "application/json", ce: []string{"gzip", "br"},
			body: []byte(`{"amount":1}`), want: "53551b4b4980e14f6c4414aafea67d503598394deb49f188c5c8df7245be65b8"},
	)
}

// TestFingerprintPinnedV3 pins the output bytes of FingerprintVersion 3.
// Stored records carry these values: a change to any of them turns
// in-flight retries into 422s, so it needs a new FingerprintVersion, not a
// new pin.
func TestFingerprintPinnedV3(t *testing.T) {
	checkPins(t, 3, fingerprintPinCasesV3(), fingerprintPinCasesV2())
}

// fingerprintPinCasesV4 are fingerprints computed by FingerprintVersion 4
// when it was first released: the version 3 cases again, which keep their
// version 3 values (version 4 hashes them as version 3 did), and include
// pointers that reach a member only by encoding/json's case folding.
func fingerprintPinCasesV4() []fingerprintPin {
	return append(fingerprintPinCasesV3(),
		fingerprintPin{name: "include-folded", method: "POST", route: "/x", ct: "application/json",
			body: []byte(`{"Amount":500,"currency":"usd","Customer":{"EMAIL":"a@b"}}`), include: []string{"/amount", "/currency", "/customer/email"},
			want: "af32ff805170f00f39db906cbc1a4080f3614377906d7d3807d3b65db44e066a"},
	)
}

// TestFingerprintPinnedV4 pins the output bytes of FingerprintVersion 4.
func TestFingerprintPinnedV4(t *testing.T) {
	if idemrt.FingerprintVersion != 4 {
		t.Fatalf("FingerprintVersion %d: add pins for the new version", idemrt.FingerprintVersion)
	}
	checkPins(t, 4, fingerprintPinCasesV4(), fingerprintPinCasesV3())
}

// checkPins compares each case's fingerprint of version with its pin,
// naming the previous version's pin (prev) in a failure.
func checkPins(t *testing.T, version int, cases, prev []fingerprintPin) {
	t.Helper()
	before := map[string]string{}
	for _, c := range prev {
		before[c.name] = c.want
	}
	for _, c := range cases {
		fp, err := idemrt.FingerprintEncodedAt(version, c.method, c.route, c.params, c.ct, c.ce, c.body, c.include, c.exclude)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := hex.EncodeToString(fp[:]); got != c.want {
			t.Errorf("version %d, %s: fingerprint %s, want %s (version %d: %s)", version, c.name, got, c.want, version-1, before[c.name])
		}
	}
}

// The version 3 layout of two pins, written out: the tag "3", the method,
// route and parameters length-prefixed, then a Content-Encoding section
// ('e', the count, each value length-prefixed) and the raw body ('r'), or
// the raw body of JSON with folded-equal names.
func TestFingerprintV3Layout(t *testing.T) {
	head := "idemgen-fp\x003\x04POST\x02/x\x00"
	for _, c := range fingerprintPinCasesV3() {
		var want string
		switch c.name {
		case "folded-names":
			want = head + "r" + string(c.body)
		case "content-encoding":
			want = head + "e\x02\x04gzip\x02br" + "r" + string(c.body)
		default:
			continue
		}
		sum := sha256.Sum256([]byte(want))
		if got := hex.EncodeToString(sum[:]); got != c.want {
			t.Errorf("%s: layout hashes to %s, pinned %s", c.name, got, c.want)
		}
	}
}

// The version 4 layout of its pin, written out: the tag "4", then the
// include section ('i'), each pointer length-prefixed, then 2 for a value
// reached by folding (1 for an exact name), the value, 0xff.
func TestFingerprintV4Layout(t *testing.T) {
	want := "idemgen-fp\x004\x04POST\x02/x\x00" + "i" +
		"\x07/amount" + "\x02" + "500" + "\xff" +
		"\x09/currency" + "\x01" + `"usd"` + "\xff" +
		"\x0f/customer/email" + "\x02" + `"a@b"` + "\xff"
	sum := sha256.Sum256([]byte(want))
	for _, c := range fingerprintPinCasesV4() {
		if c.name == "include-folded" && hex.EncodeToString(sum[:]) != c.want {
			t.Errorf("include-folded: layout hashes to %x, pinned %s", sum, c.want)
		}
	}
}
