/**
 * A small decoder for the `grpc-status-details-bin` trailer: a serialized
 * `google.rpc.Status` whose `details` hold a `google.rpc.ErrorInfo`.
 *
 * ts-proto did not generate the google.rpc types, and three tiny messages do not
 * justify another dependency, so they are read with @bufbuild/protobuf's
 * BinaryReader. Unknown fields are skipped, so newer senders stay readable.
 *
 * @packageDocumentation
 */
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** `google.protobuf.Any`: a packed message and its type URL. */
export interface AnyMessage {
  /** e.g. `type.googleapis.com/google.rpc.ErrorInfo`. */
  typeUrl: string;
  /** The packed message's bytes. */
  value: Uint8Array;
}

/** `google.rpc.Status`: the rich status carried in the trailer. */
export interface RpcStatus {
  /** gRPC status code number. */
  code: number;
  /** Developer-facing message. */
  message: string;
  /** Detail messages. */
  details: AnyMessage[];
}

/** `google.rpc.ErrorInfo`: the machine-readable reason of an error. */
export interface ErrorInfo {
  /** e.g. `NOT_YOUR_TURN`. */
  reason: string;
  /** e.g. `agentnet.v1`. */
  domain: string;
  /** Structured context (ids involved). */
  metadata: Record<string, string>;
}

/** Type URL of a packed `google.rpc.ErrorInfo`. */
export const ERROR_INFO_TYPE_URL = "type.googleapis.com/google.rpc.ErrorInfo";

function fields(bytes: Uint8Array, onField: (reader: BinaryReader, fieldNo: number, wireType: WireType) => boolean): void {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [fieldNo, wireType] = reader.tag();
    if (!onField(reader, fieldNo, wireType)) reader.skip(wireType, fieldNo);
  }
}

/** Decode a `google.protobuf.Any`. */
export function decodeAny(bytes: Uint8Array): AnyMessage {
  const out: AnyMessage = { typeUrl: "", value: new Uint8Array(0) };
  fields(bytes, (reader, fieldNo, wireType) => {
    if (fieldNo === 1 && wireType === WireType.LengthDelimited) out.typeUrl = reader.string();
    else if (fieldNo === 2 && wireType === WireType.LengthDelimited) out.value = reader.bytes();
    else return false;
    return true;
  });
  return out;
}

/**
 * Decode a serialized `google.rpc.Status` (the value of the
 * `grpc-status-details-bin` trailer). Throws on malformed bytes.
 */
export function decodeRpcStatus(bytes: Uint8Array): RpcStatus {
  const out: RpcStatus = { code: 0, message: "", details: [] };
  fields(bytes, (reader, fieldNo, wireType) => {
    if (fieldNo === 1 && wireType === WireType.Varint) out.code = reader.int32();
    else if (fieldNo === 2 && wireType === WireType.LengthDelimited) out.message = reader.string();
    else if (fieldNo === 3 && wireType === WireType.LengthDelimited) out.details.push(decodeAny(reader.bytes()));
    else return false;
    return true;
  });
  return out;
}

function decodeMapEntry(bytes: Uint8Array): [string, string] {
  let key = "";
  let value = "";
  fields(bytes, (reader, fieldNo, wireType) => {
    if (fieldNo === 1 && wireType === WireType.LengthDelimited) key = reader.string();
    else if (fieldNo === 2 && wireType === WireType.LengthDelimited) value = reader.string();
    else return false;
    return true;
  });
  return [key, value];
}

/** Decode a serialized `google.rpc.ErrorInfo`. Throws on malformed bytes. */
export function decodeErrorInfo(bytes: Uint8Array): ErrorInfo {
  const out: ErrorInfo = { reason: "", domain: "", metadata: {} };
  fields(bytes, (reader, fieldNo, wireType) => {
    if (fieldNo === 1 && wireType === WireType.LengthDelimited) out.reason = reader.string();
    else if (fieldNo === 2 && wireType === WireType.LengthDelimited) out.domain = reader.string();
    else if (fieldNo === 3 && wireType === WireType.LengthDelimited) {
      const [key, value] = decodeMapEntry(reader.bytes());
      out.metadata[key] = value;
    } else return false;
    return true;
  });
  return out;
}

/** The first `ErrorInfo` among a status's details, if any. */
export function findErrorInfo(status: RpcStatus): ErrorInfo | undefined {
  for (const detail of status.details) {
    if (detail.typeUrl === ERROR_INFO_TYPE_URL || detail.typeUrl.endsWith("/google.rpc.ErrorInfo")) {
      return decodeErrorInfo(detail.value);
    }
  }
  return undefined;
}
