module github.com/retrykit/backoff/interop/river

go 1.26.0

replace github.com/retrykit/backoff => ../..

require (
	github.com/retrykit/backoff v0.1.0
	github.com/riverqueue/river v0.51.2
	github.com/riverqueue/river/rivertype v0.51.2
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	k8s.io/utils v0.0.0-20251002143259-bc988d571ff4
)

require (
	github.com/riverqueue/river/riverdriver v0.51.2 // indirect
	github.com/riverqueue/river/rivershared v0.51.2 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
