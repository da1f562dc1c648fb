package schemas

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseConfig feeds the config parser arbitrary YAML and JSON. It must never panic, and a
// config that parses and validates must survive json.Marshal and ParseConfig(…, "json")
// unchanged. The seed corpus is every file of testdata/config (plus testdata/fuzz).
func FuzzParseConfig(f *testing.F) {
	files, err := filepath.Glob("testdata/config/*")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.HasSuffix(file, ".json"))
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		format := ConfigFormatYAML
		if isJSON {
			format = ConfigFormatJSON
		}
		cfg, err := ParseConfig(data, format)
		if err != nil {
			if cfg != nil {
				t.Fatalf("ParseConfig returned a config with error %v", err)
			}
			return
		}
		if cfg.Validate() != nil {
			return
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("json.Marshal of a valid config: %v", err)
		}
		back, err := ParseConfig(b, ConfigFormatJSON)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", b, err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("re-parsed config %s is invalid: %v", b, err)
		}
		if got, want := withoutLines(back), withoutLines(cfg); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip changed the config:\n got %+v\nwant %+v\njson %s", got, want, b)
		}
		records, err := cfg.Records()
		if err != nil {
			t.Fatalf("Records of a valid config: %v", err)
		}
		for _, r := range records {
			if _, err := DecodeConfigRecord(r.Key, r.Value); err != nil {
				t.Fatalf("DecodeConfigRecord(%s, %s): %v", r.Key, r.Value, err)
			}
		}
	})
}
