/**
 * Several hub replicas as one grpc-js target.
 *
 * grpc-js resolves `ipv4:a:p,b:p` (and `ipv6:[a]:p,[b]:p`) to every address in
 * order, and its default `pick_first` policy connects to the first that answers
 * and moves on to another when that connection fails: a client given several
 * replicas of one hub (on one Redis store) fails over without code of ours.
 */
import { isIP } from "node:net";
import { AgentNetError, Reason } from "./errors";

/** `host` and `port` of `host:port` / `[v6]:port`, or undefined when `address` is not that shape. */
function splitHostPort(address: string): { host: string; port: string } | undefined {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(address) ?? /^([^:[\]]+):(\d+)$/.exec(address);
  return m === null ? undefined : { host: m[1] ?? "", port: m[2] ?? "" };
}

function invalid(message: string): AgentNetError {
  return new AgentNetError({ code: 3, reason: Reason.INVALID_ARGUMENT, message });
}

/**
 * The grpc-js target of a hub at `target` plus the further replicas `more`
 * (duplicates and empty entries dropped): `target` itself when that leaves one
 * address, else an `ipv4:`/`ipv6:` list. Several replicas must be IP literals of
 * one family (`host:port`); for names, give one `dns:` target whose name has
 * several addresses. Throws INVALID_ARGUMENT otherwise.
 */
export function channelTarget(target: string, more: readonly string[] = []): string {
  const all: string[] = [];
  for (const raw of [target, ...more]) {
    const address = raw.trim();
    if (address !== "" && !all.includes(address)) all.push(address);
  }
  if (all.length === 0) throw invalid("the hub target is empty; pass host:port, e.g. 127.0.0.1:50051");
  if (all.length === 1) return all[0] ?? "";
  const families = new Set<number>();
  for (const address of all) {
    const parts = splitHostPort(address);
    const family = parts === undefined ? 0 : isIP(parts.host);
    if (family === 0) {
      throw invalid(
        `hub replica address "${address}" is not an IP host:port; several targets must be IP addresses ` +
          `(e.g. 10.0.0.2:50051 or [::1]:50051), or give one "dns:" target whose name has several addresses`,
      );
    }
    families.add(family);
  }
  if (families.size > 1) {
    throw invalid(`hub replica addresses mix IPv4 and IPv6 (${all.join(", ")}); give addresses of one family`);
  }
  return `${families.has(6) ? "ipv6" : "ipv4"}:${all.join(",")}`;
}
