package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tributary-cdp/tributary/platform"
)

// TestSASL authenticates against an embedded broker that requires SASL, with each mechanism,
// and checks that a wrong password is refused.
func TestSASL(t *testing.T) {
	for _, mech := range []string{platform.SASLPlain, platform.SASLScramSHA256, platform.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "svc", "right"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, tt := range []struct {
				password string
				ok       bool
			}{{"right", true}, {"wrong", false}} {
				s := platform.KafkaSettings{
					Brokers: c.ListenAddrs(), SASLMechanism: mech, SASLUsername: "svc", SASLPassword: tt.password,
					ReplicationFactor: -1, Partitions: 1,
				}
				cl, err := platform.NewKafkaClient(s, zerolog.Nop())
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = cl.Ping(ctx)
				cancel()
				cl.Close()
				if tt.ok && err != nil {
					t.Errorf("password %s: Ping = %v, want success", tt.password, err)
				}
				if !tt.ok && err == nil {
					t.Errorf("password %s: Ping succeeded", tt.password)
				}
				if err != nil && strings.Contains(err.Error(), tt.password) {
					t.Errorf("the error shows the password: %v", err)
				}
			}
		})
	}
}
