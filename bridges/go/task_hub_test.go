package agentnet_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// A Go agent checkpoints a long task, the hub and the agent restart, and the
// agent (the same identity, from its saved credentials) reads the checkpoint
// back; another identity may not read it.
func TestTaskCheckpointSurvivesRestarts(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	dir := t.TempDir()
	h := testhub.StartIn(t, dir)
	owner, err := agentnet.Register(ctx, h.Addr, &agentnet.Passport{Name: "go-cruncher", Kind: agentnet.KindRemoteAgent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := owner.Credentials()
	task, err := owner.StartTask(ctx, agentnet.StartTaskRequest{Title: "crunch"})
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := owner.ReadTaskCheckpoint(ctx, task.GetTaskId()); err != nil || cp != nil {
		t.Fatalf("checkpoint before any save: %s, %v", cp, err)
	}
	for step := 1; step <= 2; step++ {
		if err := owner.CheckpointTask(ctx, task.GetTaskId(), map[string]any{"step": step}); err != nil {
			t.Fatal(err)
		}
	}
	if err := owner.CheckpointTask(ctx, task.GetTaskId(), []int{1}); !isReason(err, agentnet.ReasonInvalidArgument) {
		t.Fatalf("a checkpoint that is not a JSON object: %v, want INVALID_ARGUMENT", err)
	}
	_ = owner.Close()
	h.Stop()

	h2 := testhub.StartIn(t, dir) // the same database: the hub restarted
	again, err := agentnet.Dial(h2.Addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Close() })
	raw, err := again.ReadTaskCheckpoint(ctx, task.GetTaskId())
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]int
	if err := json.Unmarshal(raw, &state); err != nil || state["step"] != 2 {
		t.Fatalf("checkpoint after the restarts: %s (%v), want step 2", raw, err)
	}
	if _, err := again.EndTask(ctx, task.GetTaskId(), map[string]any{"sum": 3}, ""); err != nil {
		t.Fatal(err)
	}
	if err := again.CheckpointTask(ctx, task.GetTaskId(), map[string]any{"late": true}); !isReason(err, agentnet.ReasonFailedPrecondition) {
		t.Fatalf("a checkpoint of an ended task: %v, want FAILED_PRECONDITION", err)
	}
	other := register(t, ctx, h2.Addr, "go-other")
	if _, err := other.ReadTaskCheckpoint(ctx, task.GetTaskId()); !isReason(err, agentnet.ReasonPermissionDenied) {
		t.Fatalf("another identity reading the checkpoint: %v, want PERMISSION_DENIED", err)
	}
}

func isReason(err error, reason string) bool {
	var e *agentnet.Error
	return errors.As(err, &e) && e.Reason == reason
}

// The tasks tool's "cancel" action and CancelTask follow the same rules: the
// owner may ask, an identity outside the task's channel may not.
func TestTaskCancelByToolAndRPC(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	owner := register(t, ctx, h.Addr, "go-task-owner")
	stranger := register(t, ctx, h.Addr, "go-task-stranger")
	first, err := owner.StartTask(ctx, agentnet.StartTaskRequest{Title: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.CallTool(ctx, agentnet.ToolCall{Name: "tasks", Arguments: map[string]any{"action": "cancel", "task_id": first.GetTaskId()}}); !isReason(err, agentnet.ReasonPermissionDenied) {
		t.Fatalf("a stranger's tasks(cancel): %v, want PERMISSION_DENIED", err)
	}
	if _, err := stranger.CancelTask(ctx, first.GetTaskId(), "mine"); !isReason(err, agentnet.ReasonPermissionDenied) {
		t.Fatalf("a stranger's CancelTask: %v, want PERMISSION_DENIED", err)
	}
	raw, err := owner.CallTool(ctx, agentnet.ToolCall{Name: "tasks", Arguments: map[string]any{"action": "cancel", "task_id": first.GetTaskId(), "reason": "enough"}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		CancelRequested bool   `json:"cancel_requested"`
		CancelReason    string `json:"cancel_reason"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || !got.CancelRequested || got.CancelReason != "enough" {
		t.Fatalf("tasks(cancel) answered %s (%v)", raw, err)
	}
	second, err := owner.StartTask(ctx, agentnet.StartTaskRequest{Title: "two"})
	if err != nil {
		t.Fatal(err)
	}
	task, err := owner.CancelTask(ctx, second.GetTaskId(), "also")
	if err != nil || !task.GetCancelRequested() {
		t.Fatalf("CancelTask: %v, %v", task, err)
	}
}

// Tasks tagged with a capability build the owner's observed track record,
// which DescribeAgent shows in its resume.
func TestObservedCapabilityStats(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	owner := register(t, ctx, h.Addr, "go-observed")
	peer := register(t, ctx, h.Addr, "go-observer")
	for _, failed := range []string{"", "", "boom"} {
		task, err := owner.StartTask(ctx, agentnet.StartTaskRequest{Title: "job", Capability: "go-analysis"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := owner.EndTask(ctx, task.GetTaskId(), nil, failed); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := peer.DescribeAgent(ctx, "go-observed")
	if err != nil {
		t.Fatal(err)
	}
	stat := rec.GetResume().GetObserved()["go-analysis"]
	if stat.GetN() != 3 || stat.GetCompleted() != 2 || stat.GetFailed() != 1 || stat.GetLastUpdated() == nil {
		t.Fatalf("observed %v, want 3 tasks: 2 completed, 1 failed", stat)
	}
	if rec.GetResume().GetLastUpdated() == nil {
		t.Fatal("resume.last_updated is not set")
	}
}
