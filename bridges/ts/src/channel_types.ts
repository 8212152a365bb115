/**
 * The built-in channel types: the one list the bridge's types are derived from. It matches the
 * hub's adapter registry (`OperatorService.GetStatus` lists it as `channel_types`);
 * `tests/system/test_architecture.py` checks it against the Python vocabulary (`netkernel/channel_types.py`).
 */
export const CHANNEL_TYPES = ["consulting", "conversation", "discussion", "workflow"] as const;

/** One of {@link CHANNEL_TYPES}: the `type` of {@link OpenChannelOptions}. */
export type ChannelType = (typeof CHANNEL_TYPES)[number];
