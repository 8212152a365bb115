package agentnet

import (
	"encoding/base64"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// hubStatuses asks the hub's own error code (netkernel.errors.error_status)
// for the grpc-status-details-bin of each governance refusal, exactly as the
// hub sends it, one base64 line per refusal.
const hubStatuses = `
import base64
from netkernel import errors as e
for err in (
    e.RateLimited("slow down", metadata={"retry_after_seconds": "0.25", "rule": "chatty"}),
    e.InboxFull("bob's inbox is full", metadata={"recipient": "agent-bob"}),
    e.RuleDenied("bots may not open workflows", metadata={"rule": "bots", "check": "access.channel_types"}),
    e.LimitExceeded("2 open channels at most", metadata={"rule": "bots", "limit": "2"}),
):
    md = dict(e.error_status(err).trailing_metadata)
    print(base64.b64encode(md["grpc-status-details-bin"]).decode())
`

func statusesFromHubCode(t *testing.T) []error {
	t.Helper()
	cmd := exec.Command(testhub.Python(), "-c", hubStatuses)
	cmd.Dir = testhub.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var errs []error
	for _, line := range strings.Fields(string(out)) {
		raw, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		var st spb.Status
		if err := proto.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		errs = append(errs, status.FromProto(&st).Err())
	}
	if len(errs) != 4 {
		t.Fatalf("%d statuses from the hub's code:\n%s", len(errs), out)
	}
	return errs
}

// The governance refusals, as the hub's error code builds them, become typed
// errors: errors.As finds their fields, errors.Is their sentinel.
func TestGovernanceRefusalsAreTypedErrors(t *testing.T) {
	errs := statusesFromHubCode(t)
	for i := range errs {
		errs[i] = FromStatus(errs[i])
	}
	rateLimited, inboxFull, ruleDenied, limitExceeded := errs[0], errs[1], errs[2], errs[3]

	var rl *RateLimitedError
	if !errors.As(rateLimited, &rl) || rl.RetryAfter != 250*time.Millisecond || rl.Err.Code != codes.ResourceExhausted ||
		rl.Err.Message != "slow down" || !errors.Is(rateLimited, ErrRateLimited) {
		t.Errorf("RATE_LIMITED: %+v", rl)
	}
	var inbox *InboxFullError
	if !errors.As(inboxFull, &inbox) || inbox.Recipient != "agent-bob" || inbox.Err.Code != codes.ResourceExhausted ||
		!errors.Is(inboxFull, ErrInboxFull) {
		t.Errorf("INBOX_FULL: %+v", inbox)
	}
	var denied *RuleDeniedError
	if !errors.As(ruleDenied, &denied) || denied.Rule != "bots" || denied.Check != "access.channel_types" ||
		denied.Err.Code != codes.PermissionDenied || !errors.Is(ruleDenied, ErrRuleDenied) {
		t.Errorf("RULE_DENIED: %+v", denied)
	}
	var limit *LimitExceededError
	if !errors.As(limitExceeded, &limit) || limit.Rule != "bots" || limit.Limit != "2" ||
		limit.Err.Code != codes.ResourceExhausted || !errors.Is(limitExceeded, ErrLimitExceeded) {
		t.Errorf("LIMIT_EXCEEDED: %+v", limit)
	}
	// Each typed view matches its own reason only.
	for i, err := range errs {
		matches := []bool{errors.As(err, new(*RateLimitedError)), errors.As(err, new(*InboxFullError)),
			errors.As(err, new(*RuleDeniedError)), errors.As(err, new(*LimitExceededError))}
		for j, m := range matches {
			if m != (i == j) {
				t.Errorf("refusal %d as view %d: %v", i, j, m)
			}
		}
		if errors.Is(err, ErrRateLimited) != (i == 0) || errors.Is(err, ErrRuleDenied) != (i == 2) {
			t.Errorf("refusal %d matches another sentinel", i)
		}
	}
	// Wrapped errors still unwrap to their typed view.
	if !errors.As(errors.Join(errors.New("posting"), rateLimited), &rl) {
		t.Error("wrapped RATE_LIMITED not found")
	}
}

// The same views from an in-stream PostResult.error, and retry hints the hub
// did not give (or gave malformed) read as zero.
func TestGovernanceRefusalsInStreamAndRetryHints(t *testing.T) {
	d := &agentnetv1.ErrorDetail{Code: int32(codes.ResourceExhausted), Reason: ReasonRateLimited, Message: "slow down",
		Metadata: map[string]string{"retry_after_seconds": "1.5"}}
	var rl *RateLimitedError
	if !errors.As(error(FromDetail(d)), &rl) || rl.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("in-stream RATE_LIMITED: %+v", rl)
	}
	for _, hint := range []string{"", "soon", "-1", "NaN", "+Inf", "1e300"} {
		st, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.ErrorInfo{
			Reason: ReasonRateLimited, Domain: ErrorDomain, Metadata: map[string]string{"retry_after_seconds": hint}})
		if !errors.As(FromStatus(st.Err()), &rl) || rl.RetryAfter != 0 {
			t.Errorf("hint %q: %+v", hint, rl)
		}
	}
	// A slow consumer's INBOX_FULL (a stream cut, no recipient) is an InboxFullError too.
	st, _ := status.New(codes.ResourceExhausted, "you stopped reading").WithDetails(&errdetails.ErrorInfo{
		Reason: ReasonInboxFull, Domain: ErrorDomain, Metadata: map[string]string{"cause": "slow_consumer"}})
	var inbox *InboxFullError
	if !errors.As(FromStatus(st.Err()), &inbox) || inbox.Recipient != "" || inbox.Err.Metadata["cause"] != "slow_consumer" {
		t.Errorf("slow consumer: %+v", inbox)
	}
	var nilErr *Error
	if nilErr.As(&rl) {
		t.Error("nil *Error matched")
	}
}
