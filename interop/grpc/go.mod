module github.com/retrykit/backoff/interop/grpc

go 1.26.0

replace github.com/retrykit/backoff => ../..

require (
	github.com/retrykit/backoff v0.1.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
	k8s.io/utils v0.0.0-20251002143259-bc988d571ff4
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)
