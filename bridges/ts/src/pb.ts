/**
 * The generated agentnet.v1 types this library's API uses, and the contract's
 * enums. Message *types* only: the generated codecs (`fromJSON(object: any)`
 * ...) stay internal so no `any` leaks into the public API.
 *
 * @packageDocumentation
 */
export {
  ChannelState,
  ErrorReason,
  InvocationStatus,
  ParticipantRole,
  PassportKind,
  Priority,
  TaskEventKind,
  TaskScope,
  TaskState,
  ToolSource,
} from "./gen";
export type {
  A2ADispatch,
  A2AReply,
  A2ASettings,
  AgentRecord,
  AgentSummary,
  Audience,
  ChannelMetadata,
  ConnectRequest,
  ConnectResponse,
  DelegateResponse,
  Delivery,
  DiscoveredAgent,
  Envelope,
  ErrorDetail,
  Execution,
  HubServiceClient,
  InvokeAgentResponse,
  Participant,
  Passport,
  RefreshCallTokenResponse,
  Resume,
  TaskMetadata,
  Timestamp,
  ToolSchema,
  Welcome,
} from "./gen";
