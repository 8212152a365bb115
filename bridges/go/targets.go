package agentnet

import (
	"net"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// targetsScheme is the resolver scheme of a client given several hub
// addresses (private to each connection: every client builds its own
// resolver and passes it with grpc.WithResolvers).
const targetsScheme = "agentnet-hubs"

// resolveTargets turns the target argument and WithTargets' addresses into
// what grpc.NewClient dials: the target itself when there is one address, else
// a manual resolver listing every address in order, whose default pick_first
// policy connects to the first that answers and moves on when it fails.
func resolveTargets(target string, more []string) (string, []grpc.DialOption, error) {
	if len(more) == 0 {
		if target == "" {
			return "", nil, invalidArgument("hub target is empty; pass host:port, e.g. 127.0.0.1:50051")
		}
		return target, nil, nil
	}
	var addrs []string
	for _, a := range append([]string{target}, more...) {
		a = strings.TrimSpace(a)
		if a == "" || slices.Contains(addrs, a) {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", nil, invalidArgument(
				"hub address %q among several targets is not host:port (%v); give each replica as host:port, e.g. 10.0.0.2:50051", a, err)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return "", nil, invalidArgument("hub targets are all empty; pass host:port addresses, e.g. 127.0.0.1:50051")
	}
	if len(addrs) == 1 {
		return addrs[0], nil, nil
	}
	endpoints := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		// ServerName: each replica's certificate is checked against its own
		// host (TLSConfig.ServerName, when set, still wins).
		endpoints[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a, ServerName: host}}}
	}
	r := manual.NewBuilderWithScheme(targetsScheme)
	r.InitialState(resolver.State{Endpoints: endpoints})
	return targetsScheme + ":///" + addrs[0], []grpc.DialOption{grpc.WithResolvers(r)}, nil
}
