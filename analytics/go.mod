module github.com/tributary-cdp/tributary/analytics

go 1.26.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/google/uuid v1.6.0
	github.com/klauspost/compress v1.20.3
	github.com/segmentio/kafka-go v0.4.51
	github.com/twmb/franz-go v1.22.2
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	go.uber.org/goleak v1.3.0
	gopkg.in/segmentio/analytics-go.v3 v3.1.0
)

require (
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/segmentio/backo-go v1.1.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/twmb/franz-go/pkg/kadm v1.19.0 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.0 // indirect
	github.com/xtgo/uuid v0.0.0-20140804021211-a0b114877d4c // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.62.0 // indirect
)
