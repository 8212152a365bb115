package agentnet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every hub refusal.
const ErrorDomain = "agentnet.v1"

// Error reasons: the names of the generated agentnetv1.ErrorReason values
// without their "ERROR_REASON_" prefix, exactly as the hub puts them in
// google.rpc.ErrorInfo.reason and ErrorDetail.reason (see docs/errors.md).
// A test keeps this list in step with the enum.
const (
	// ReasonProtocolError: the envelope breaks the channel's protocol (FAILED_PRECONDITION).
	ReasonProtocolError = "PROTOCOL_ERROR"
	// ReasonChannelClosed: the channel is closed or expired, or a consulting
	// channel already has its question and reply (FAILED_PRECONDITION).
	ReasonChannelClosed = "CHANNEL_CLOSED"
	// ReasonNotParticipant: the caller is not a participant of the channel (PERMISSION_DENIED).
	ReasonNotParticipant = "NOT_PARTICIPANT"
	// ReasonNotYourTurn: another participant is expected to speak (FAILED_PRECONDITION).
	ReasonNotYourTurn = "NOT_YOUR_TURN"
	// ReasonUnauthenticated: missing, unknown or revoked credential (UNAUTHENTICATED).
	ReasonUnauthenticated = "UNAUTHENTICATED"
	// ReasonPermissionDenied: authenticated but not allowed, e.g. a spoofed sender (PERMISSION_DENIED).
	ReasonPermissionDenied = "PERMISSION_DENIED"
	// ReasonInboxFull: a recipient's inbox is full; retry later (RESOURCE_EXHAUSTED).
	ReasonInboxFull = "INBOX_FULL"
	// ReasonRateLimited: the caller exceeded its rate limit; retry later (RESOURCE_EXHAUSTED).
	ReasonRateLimited = "RATE_LIMITED"
	// ReasonInvalidArgument: a field is malformed or out of range (INVALID_ARGUMENT).
	ReasonInvalidArgument = "INVALID_ARGUMENT"
	// ReasonNotFound: the named agent, channel, task, execution or path does not exist (NOT_FOUND).
	ReasonNotFound = "NOT_FOUND"
	// ReasonAlreadyExists: the thing being created exists already, e.g. a passport name (ALREADY_EXISTS).
	ReasonAlreadyExists = "ALREADY_EXISTS"
	// ReasonTimeout: a wait (task wait, delegate, invoke, open) timed out (DEADLINE_EXCEEDED).
	ReasonTimeout = "TIMEOUT"
	// ReasonDepthExceeded: the delegation depth is above the hub's limit (FAILED_PRECONDITION).
	ReasonDepthExceeded = "DEPTH_EXCEEDED"
	// ReasonPayloadTooLarge: a payload exceeds the configured size limit (RESOURCE_EXHAUSTED).
	ReasonPayloadTooLarge = "PAYLOAD_TOO_LARGE"
	// ReasonTokenExpired: an A2A call token expired; refresh it and retry (UNAUTHENTICATED).
	ReasonTokenExpired = "TOKEN_EXPIRED"
	// ReasonUnimplemented: the RPC or feature is not implemented by this server yet (UNIMPLEMENTED).
	ReasonUnimplemented = "UNIMPLEMENTED"
	// ReasonInternal: a bug in the server; nothing was changed (INTERNAL).
	ReasonInternal = "INTERNAL"
	// ReasonUnavailable: the server is shutting down or a backend is unreachable; retry (UNAVAILABLE).
	ReasonUnavailable = "UNAVAILABLE"
	// ReasonFailedPrecondition: a precondition other than turn-taking failed (FAILED_PRECONDITION).
	ReasonFailedPrecondition = "FAILED_PRECONDITION"
	// ReasonOutOfRange: an offset lies outside the valid range (OUT_OF_RANGE).
	ReasonOutOfRange = "OUT_OF_RANGE"
	// ReasonRuleDenied: a governance rule (or the hub's arbiter) refuses the
	// action (PERMISSION_DENIED); see RuleDeniedError.
	ReasonRuleDenied = "RULE_DENIED"
	// ReasonLimitExceeded: a governance limit is reached, e.g. open channels or
	// running tasks (RESOURCE_EXHAUSTED); see LimitExceededError.
	ReasonLimitExceeded = "LIMIT_EXCEEDED"
	// ReasonSuperseded: a newer Connect stream of the same agent took this
	// one over (FAILED_PRECONDITION; metadata superseded_by = the newer
	// stream's session id). A Session stops on it with ErrSessionReplaced.
	ReasonSuperseded = "SUPERSEDED"
	// ReasonTurnFailed: the agent that was to answer reported that its turn
	// failed (ABORTED; metadata channel_id, envelope_id, agent_id,
	// error_class): no answer is coming.
	ReasonTurnFailed = "TURN_FAILED"
)

// Sentinels of the governance refusals, for errors.Is (they match any *Error
// with the same reason): errors.Is(err, agentnet.ErrRateLimited).
var (
	ErrRateLimited   = &Error{Reason: ReasonRateLimited}
	ErrInboxFull     = &Error{Reason: ReasonInboxFull}
	ErrRuleDenied    = &Error{Reason: ReasonRuleDenied}
	ErrLimitExceeded = &Error{Reason: ReasonLimitExceeded}
)

// RateLimitedError is a RATE_LIMITED refusal: the caller sends faster than
// its rule's rate allows. Wait RetryAfter, then retry. Get it with errors.As:
//
//	var rl *agentnet.RateLimitedError
//	if errors.As(err, &rl) { time.Sleep(rl.RetryAfter) }
type RateLimitedError struct {
	// Err is the refusal itself (code, message, all metadata).
	Err *Error
	// RetryAfter is how long the hub asks the caller to wait (ErrorInfo
	// metadata retry_after_seconds; 0 when it gave none).
	RetryAfter time.Duration
}

// InboxFullError is an INBOX_FULL refusal: the recipient's inbox is at its
// cap; retry later. (A Connect or ReadWal stream ended for reading too slowly
// is INBOX_FULL too, with metadata cause=slow_consumer and no Recipient.)
type InboxFullError struct {
	// Err is the refusal itself (code, message, all metadata).
	Err *Error
	// Recipient is the agent whose inbox is full (metadata recipient).
	Recipient string
}

// RuleDeniedError is a RULE_DENIED refusal: a governance rule or the hub's
// arbiter does not allow the action. Retrying does not help.
type RuleDeniedError struct {
	// Err is the refusal itself (code, message, all metadata).
	Err *Error
	// Rule is the id of the refusing rule (metadata rule).
	Rule string
	// Check is the part of the rule that refused, e.g. "access.peers"
	// (metadata check).
	Check string
}

// LimitExceededError is a LIMIT_EXCEEDED refusal: a governance limit (open
// channels, running tasks, ...) is reached; retry once something ended.
type LimitExceededError struct {
	// Err is the refusal itself (code, message, all metadata).
	Err *Error
	// Rule is the id of the rule that sets the limit (metadata rule).
	Rule string
	// Limit is the limit reached (metadata limit).
	Limit string
}

// Error implements the error interface.
func (e *RateLimitedError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *RateLimitedError) Unwrap() error { return e.Err }

// Error implements the error interface.
func (e *InboxFullError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *InboxFullError) Unwrap() error { return e.Err }

// Error implements the error interface.
func (e *RuleDeniedError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *RuleDeniedError) Unwrap() error { return e.Err }

// Error implements the error interface.
func (e *LimitExceededError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *LimitExceededError) Unwrap() error { return e.Err }

// As lets errors.As find the typed view of a governance refusal:
// *RateLimitedError, *InboxFullError, *RuleDeniedError or
// *LimitExceededError, built from e's reason and metadata.
func (e *Error) As(target any) bool {
	if e == nil {
		return false
	}
	md := e.Metadata
	switch t := target.(type) {
	case **RateLimitedError:
		if e.Reason == ReasonRateLimited {
			*t = &RateLimitedError{Err: e, RetryAfter: retryAfter(md["retry_after_seconds"])}
			return true
		}
	case **InboxFullError:
		if e.Reason == ReasonInboxFull {
			*t = &InboxFullError{Err: e, Recipient: md["recipient"]}
			return true
		}
	case **RuleDeniedError:
		if e.Reason == ReasonRuleDenied {
			*t = &RuleDeniedError{Err: e, Rule: md["rule"], Check: md["check"]}
			return true
		}
	case **LimitExceededError:
		if e.Reason == ReasonLimitExceeded {
			*t = &LimitExceededError{Err: e, Rule: md["rule"], Limit: md["limit"]}
			return true
		}
	}
	return false
}

// retryAfter parses a retry_after_seconds value ("0.25"); 0 when absent,
// malformed, negative or not finite.
func retryAfter(seconds string) time.Duration {
	f, err := strconv.ParseFloat(strings.TrimSpace(seconds), 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) || f > math.MaxInt64/float64(time.Second) {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// ReasonOf returns the reason string of a generated ErrorReason value
// ("" for ERROR_REASON_UNSPECIFIED and unknown values).
func ReasonOf(r agentnetv1.ErrorReason) string {
	name, ok := agentnetv1.ErrorReason_name[int32(r)]
	if !ok || r == agentnetv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
		return ""
	}
	return strings.TrimPrefix(name, "ERROR_REASON_")
}

// Error is a refusal from the hub (or a transport failure) in one shape,
// whether it arrived as a gRPC status with a google.rpc.ErrorInfo detail
// (unary calls) or as an ErrorDetail inside the Connect stream (PostResult).
//
// Reason is one of the Reason* constants when the hub supplied one; it is
// empty for pure transport errors (e.g. the hub is unreachable), where Code
// alone says what happened.
type Error struct {
	// Code is the gRPC status code (e.g. codes.FailedPrecondition).
	Code codes.Code
	// Reason is the ErrorInfo reason, e.g. "NOT_YOUR_TURN" ("" when absent).
	Reason string
	// Message says what was wrong and what to do.
	Message string
	// Metadata carries the ids involved, e.g. {"channel_id": "..."}.
	Metadata map[string]string

	cause error
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	var b strings.Builder
	b.WriteString("agentnet: ")
	if e.Reason != "" {
		b.WriteString(e.Reason)
	} else {
		b.WriteString(e.Code.String())
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the underlying error, if any (a context error when a call
// was cancelled or timed out on the client side).
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus lets status.FromError and status.Code see the original code.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(e.Code, e.Message)
	if e.Reason == "" {
		return st
	}
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: e.Reason, Domain: ErrorDomain, Metadata: e.Metadata})
	if err != nil {
		return st
	}
	return withInfo
}

// Is reports whether target is an *Error with the same Reason (and Code,
// when target's Code is not OK), so errors.Is(err, &agentnet.Error{Reason:
// agentnet.ReasonNotYourTurn}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	if t.Reason != "" && t.Reason != e.Reason {
		return false
	}
	if t.Code != codes.OK && t.Code != e.Code {
		return false
	}
	return t.Reason != "" || t.Code != codes.OK
}

// AsError returns the *Error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e, true
	}
	return nil, false
}

// IsReason reports whether err is (or wraps) an *Error with the given reason,
// e.g. IsReason(err, ReasonNotYourTurn).
func IsReason(err error, reason string) bool {
	e, ok := AsError(err)
	return ok && e.Reason == reason
}

// ReasonFor returns the reason of the *Error inside err ("" if none).
func ReasonFor(err error) string {
	if e, ok := AsError(err); ok {
		return e.Reason
	}
	return ""
}

// FromStatus converts an error returned by a generated gRPC stub into an
// *Error, reading the reason and metadata from the google.rpc.ErrorInfo
// detail of domain "agentnet.v1". A nil error stays nil; an error that is not
// a gRPC status (and not a context error) is wrapped with codes.Unknown.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	if e, ok := AsError(err); ok {
		return e
	}
	st, ok := status.FromError(err)
	if !ok {
		switch {
		case errors.Is(err, context.Canceled):
			return &Error{Code: codes.Canceled, Message: err.Error(), cause: err}
		case errors.Is(err, context.DeadlineExceeded):
			return &Error{Code: codes.DeadlineExceeded, Message: err.Error(), cause: err}
		}
		return &Error{Code: codes.Unknown, Message: err.Error(), cause: err}
	}
	out := &Error{Code: st.Code(), Message: st.Message()}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || (info.GetDomain() != ErrorDomain && info.GetDomain() != "") {
			continue
		}
		out.Reason = info.GetReason()
		if len(info.GetMetadata()) > 0 {
			out.Metadata = maps.Clone(info.GetMetadata())
		}
		break
	}
	// Keep context errors reachable through errors.Is for client-side
	// cancellations and deadlines (which carry no ErrorInfo).
	if out.Reason == "" {
		switch st.Code() {
		case codes.Canceled:
			out.cause = context.Canceled
		case codes.DeadlineExceeded:
			out.cause = context.DeadlineExceeded
		}
	}
	return out
}

// FromDetail converts an in-stream ErrorDetail (PostResult.error) into an *Error.
func FromDetail(d *agentnetv1.ErrorDetail) *Error {
	if d == nil {
		return &Error{Code: codes.Unknown, Message: "missing error detail"}
	}
	code := codes.Code(uint32(d.GetCode()))
	if d.GetCode() < 0 || d.GetCode() > 16 {
		code = codes.Unknown
	}
	out := &Error{Code: code, Reason: d.GetReason(), Message: d.GetMessage()}
	if len(d.GetMetadata()) > 0 {
		out.Metadata = maps.Clone(d.GetMetadata())
	}
	return out
}

// ErrClosed is returned by calls on a closed Client or Session.
var ErrClosed = errors.New("agentnet: closed")

// ErrSessionReplaced ends a Session whose stream the hub closed because a
// newer Connect stream of the same agent took over (another process, or a
// second Connect, through this hub or another replica): the hub's SUPERSEDED
// error. The Session does not reconnect, so two processes of one agent do not
// keep taking the stream from each other. Session.Err wraps both this
// sentinel and the hub's *Error (reason ReasonSuperseded, metadata
// superseded_by), so errors.Is(err, ErrSessionReplaced) and AsError work.
var ErrSessionReplaced = errors.New("agentnet: the hub replaced this Connect stream with a newer one of the same agent")

// invalidArgument builds a client-side INVALID_ARGUMENT *Error (the same
// shape the hub uses, so callers handle both alike).
func invalidArgument(format string, args ...any) *Error {
	return &Error{Code: codes.InvalidArgument, Reason: ReasonInvalidArgument, Message: fmt.Sprintf(format, args...)}
}
