package agentnet_test

import (
	"encoding/json"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// A Go agent narrows its own rule after registration; its next OpenChannel
// obeys it, GetRule reports it, and removing it lifts it.
func TestSetRuleAfterRegistration(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	agent := register(t, ctx, h.Addr, "go-ruled")
	register(t, ctx, h.Addr, "go-ruled-peer")
	open := func() error {
		_, err := agent.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"go-ruled-peer"}})
		return err
	}
	if err := open(); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.SetRule(ctx, map[string]any{"access": map[string]any{"channel_types": []string{"consulting"}}}); err != nil {
		t.Fatal(err)
	}
	if err := open(); !isReason(err, agentnet.ReasonRuleDenied) {
		t.Fatalf("open after SetRule: %v, want RULE_DENIED", err)
	}
	report, err := agent.GetRule(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var own map[string]any
	if err := json.Unmarshal([]byte(report.GetRuleJson()), &own); err != nil || own["access"] == nil {
		t.Fatalf("GetRule own rule %q (%v)", report.GetRuleJson(), err)
	}
	if n := len(report.GetRules()); n != 2 || report.GetRules()[1].GetId() != "own" {
		t.Fatalf("GetRule rules %v, want default and own", report.GetRules())
	}
	if _, err := agent.SetRule(ctx, map[string]any{"acces": 1}); !isReason(err, agentnet.ReasonInvalidArgument) {
		t.Fatalf("SetRule with a typo: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := agent.SetRule(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := open(); err != nil {
		t.Fatalf("open after removing the rule: %v", err)
	}
}

// A Go agent restricts who may reach it (access.inbound_from): an identity
// its selector does not pick is refused with RULE_DENIED at OpenChannel.
func TestInboundFromRefusesOthers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	vip := register(t, ctx, h.Addr, "go-vip")
	stranger := register(t, ctx, h.Addr, "go-stranger")
	assistant := register(t, ctx, h.Addr, "go-assistant-1")
	if _, err := vip.SetRule(ctx, map[string]any{"access": map[string]any{"inbound_from": map[string]any{"names": []string{"go-assistant-*"}}}}); err != nil {
		t.Fatal(err)
	}
	_, err := stranger.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "consulting", Targets: []string{"go-vip"}})
	if !isReason(err, agentnet.ReasonRuleDenied) {
		t.Fatalf("a stranger opening a channel with the vip: %v, want RULE_DENIED", err)
	}
	if _, err := assistant.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "consulting", Targets: []string{"go-vip"}}); err != nil {
		t.Fatalf("an assistant opening a channel with the vip: %v", err)
	}
}
