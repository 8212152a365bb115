/**
 * Connecting to a hub over TLS or mutual TLS.
 *
 * A hub started with `--tls-cert` / `--tls-key` serves TLS; with
 * `--tls-client-ca` it also requires a client certificate (mTLS). Pass
 * {@link TlsOptions} as `ClientOptions.tls` to `register`, `registerHuman` or
 * `Client.fromCredential`.
 *
 * @packageDocumentation
 */
import { readFileSync } from "node:fs";
import { type ChannelCredentials, type ChannelOptions, credentials as grpcCredentials } from "@grpc/grpc-js";
import { AgentNetError, Reason } from "./errors";

/** How to reach a hub that serves TLS. Every file is PEM. */
export interface TlsOptions {
  /** CA bundle that signed the hub's certificate (default: Node's root certificates). */
  caFile?: string;
  /**
   * This client's certificate chain, for a hub that requires client certificates
   * (mTLS); needs `keyFile`. Under `--tls-bind-identity` it must name the agent
   * (URI SAN `agentnet:agent:<name>`, else subject CN).
   */
  certFile?: string;
  /** The private key of `certFile`. */
  keyFile?: string;
  /**
   * Name to verify the hub's certificate against (default: the target's host),
   * e.g. `hub.internal` when dialing an address the certificate does not list.
   */
  serverName?: string;
}

/** The grpc-js channel credentials and options of a TLS connection. */
export interface TlsChannel {
  /** TLS (or mTLS) channel credentials. */
  credentials: ChannelCredentials;
  /** The server-name override, when `serverName` is set. */
  channelOptions: ChannelOptions;
}

/**
 * Build the channel credentials for `tls`. Throws an {@link AgentNetError}
 * with reason `INVALID_ARGUMENT` naming the file when a file is unreadable or
 * not what it should be, or when only one of `certFile` / `keyFile` is set.
 */
export function tlsChannel(tls: TlsOptions): TlsChannel {
  if ((tls.certFile === undefined) !== (tls.keyFile === undefined)) {
    throw invalid("TLS certFile and keyFile go together (mTLS): set both or neither");
  }
  const ca = tls.caFile === undefined ? null : readPem(tls.caFile, "caFile", "CERTIFICATE");
  const cert = tls.certFile === undefined ? null : readPem(tls.certFile, "certFile", "CERTIFICATE");
  const key = tls.keyFile === undefined ? null : readPem(tls.keyFile, "keyFile", "PRIVATE KEY");
  let credentials: ChannelCredentials;
  try {
    credentials = grpcCredentials.createSsl(ca, key, cert);
  } catch (err) {
    throw invalid(`TLS files ${[tls.caFile, tls.certFile, tls.keyFile].filter(Boolean).join(", ")}: ${String(err)}`, err);
  }
  const channelOptions: ChannelOptions =
    tls.serverName === undefined || tls.serverName === ""
      ? {}
      : { "grpc.ssl_target_name_override": tls.serverName, "grpc.default_authority": tls.serverName };
  return { credentials, channelOptions };
}

function readPem(path: string, field: string, label: string): Buffer {
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (err) {
    throw invalid(`TLS ${field} ${path} cannot be read: ${err instanceof Error ? err.message : String(err)}`, err);
  }
  if (!content.toString("latin1").includes(`-----BEGIN `) || !content.toString("latin1").includes(label)) {
    throw invalid(`TLS ${field} ${path} holds no PEM ${label.toLowerCase()}`);
  }
  return content;
}

function invalid(message: string, cause?: unknown): AgentNetError {
  return new AgentNetError({ code: 3, reason: Reason.INVALID_ARGUMENT, message, cause });
}
