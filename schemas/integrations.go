package schemas

import "bytes"

// IntegrationSetting reads the member key of an integrations object (docs/routing.md#integrations-switches), as the
// router applies it: true, or an object of destination options, enables (on=true, set=true);
// false disables (on=false, set=true); a missing member, null, or any other value is not a
// switch (set=false). Keys compare exactly: "webhooks" is not "Webhooks". An integrations value
// that is empty or not an object holds no switches.
func IntegrationSetting(integrations []byte, key string) (on, set bool) {
	if len(integrations) == 0 {
		return false, false
	}
	_ = eachMember(integrations, func(k []byte, kEsc bool, val []byte) error {
		if !keyIs(k, kEsc, key) {
			return nil
		}
		// A repeated key: the last one wins, as in encoding/json.
		switch {
		case bytes.Equal(val, []byte("true")):
			on, set = true, true
		case bytes.Equal(val, []byte("false")):
			on, set = false, true
		case len(val) > 0 && val[0] == '{':
			on, set = true, true
		default:
			on, set = false, false
		}
		return nil
	})
	return on, set
}
