package agentnet

import (
	"reflect"
	"testing"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
)

// Every RPC of HubService has a client method: a unary one in the generated
// HubRPC table (with the stub's request and response types), the others
// written by hand. make check-gen keeps the table in step with proto/.
func TestEveryHubRPCHasAClientMethod(t *testing.T) {
	handWritten := map[string]any{
		"Connect":       (*Client).Connect,
		"Register":      Register,
		"RegisterHuman": RegisterHuman,
		"ReadWal":       (*Client).ReadWal,
	}
	stub := reflect.TypeFor[agentnetv1.HubServiceClient]()
	table := reflect.TypeFor[HubRPC]()
	desc := agentnetv1.HubService_ServiceDesc
	names := make([]string, 0, len(desc.Methods)+len(desc.Streams))
	for _, m := range desc.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range desc.Streams {
		names = append(names, s.StreamName)
	}
	if len(names) < 40 {
		t.Fatalf("HubService has %d RPCs; expected the whole service", len(names))
	}
	for _, name := range names {
		if _, ok := handWritten[name]; ok {
			continue
		}
		got, ok := table.MethodByName(name)
		if !ok {
			t.Errorf("HubRPC has no method %s: run make proto (or write it by hand and list it here)", name)
			continue
		}
		want, _ := stub.MethodByName(name)
		// HubRPC's method has the receiver first; the stub's interface method does not.
		if got.Type.In(2) != want.Type.In(1) || got.Type.Out(0) != want.Type.Out(0) {
			t.Errorf("HubRPC.%s is %v; the stub's is %v", name, got.Type, want.Type)
		}
	}
}
