package schemas

import "testing"

func TestHashWriteKey(t *testing.T) {
	tests := []struct{ key, want string }{
		// sha256 test vectors.
		{"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := HashWriteKey(tt.key); got != tt.want {
				t.Errorf("HashWriteKey(%q) = %s, want %s", tt.key, got, tt.want)
			}
			if !validWriteKeyHash(HashWriteKey(tt.key)) {
				t.Errorf("HashWriteKey(%q) is not a valid writeKeyHash", tt.key)
			}
		})
	}
}

func TestSourceKeyHash(t *testing.T) {
	h := HashWriteKey("wk")
	tests := []struct {
		name string
		src  Source
		want string
	}{
		{"plaintext key is hashed", Source{WriteKey: "wk"}, h},
		{"hash is returned as is", Source{WriteKeyHash: h}, h},
		{"neither", Source{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.src.KeyHash(); got != tt.want {
				t.Errorf("KeyHash() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidWriteKeyHash(t *testing.T) {
	h := HashWriteKey("x")
	tests := []struct {
		hash string
		want bool
	}{
		{h, true},
		{"sha256:" + "A" + h[8:], false}, // upper-case hex
		{h[:len(h)-1], false},            // 63 digits
		{h + "0", false},                 // 65 digits
		{"sha1:" + h[7:], false},
		{"sha256:" + "g" + h[8:], false},
	}
	for _, tt := range tests {
		t.Run(tt.hash, func(t *testing.T) {
			if got := validWriteKeyHash(tt.hash); got != tt.want {
				t.Errorf("validWriteKeyHash(%q) = %v, want %v", tt.hash, got, tt.want)
			}
		})
	}
}
