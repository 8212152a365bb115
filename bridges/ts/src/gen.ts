/**
 * The generated agentnet.v1 stubs (ts-proto, @grpc/grpc-js), compiled together
 * with this package from `gen/ts/src` (see tsconfig.json).
 *
 * @packageDocumentation
 */
export * from "../../../gen/ts/src/index";
export { Timestamp } from "../../../gen/ts/src/google/protobuf/timestamp";
