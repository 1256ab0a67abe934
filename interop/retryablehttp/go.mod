module github.com/retrykit/backoff/interop/retryablehttp

go 1.26

replace github.com/retrykit/backoff => ../..

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/retrykit/backoff v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	k8s.io/utils v0.0.0-20251002143259-bc988d571ff4
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
