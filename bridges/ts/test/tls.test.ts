import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { AgentNetError, type Client, Reason, register, type RegisterOptions, type TlsOptions, tlsChannel } from "../src";
import { type HubProcess, pythonPath, repoRoot, startHub } from "../testkit/hub";
import { Collector } from "../testkit/wait";

/** Throwaway certificates (python -m tests.system.security.certs): ca.pem, server.pem/.key, client-<name>.pem/.key. */
function certs(...clients: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "agentnet-ts-certs-"));
  dirs.push(dir);
  const args = ["-m", "tests.system.security.certs", dir, ...clients.flatMap((c) => ["--client", c])];
  execFileSync(pythonPath(), args, { cwd: repoRoot() });
  return dir;
}

const dirs: string[] = [];
const hubs: HubProcess[] = [];
const clients: Client[] = [];
let dir = "";
let tlsHub: HubProcess;
let mtlsHub: HubProcess;
let boundHub: HubProcess;

before(async () => {
  dir = certs("ts-alice", "ts-bob");
  const server = ["--tls-cert", join(dir, "server.pem"), "--tls-key", join(dir, "server.key")];
  const mtls = [...server, "--tls-client-ca", join(dir, "ca.pem")];
  [tlsHub, mtlsHub, boundHub] = await Promise.all([startHub(server), startHub(mtls), startHub([...mtls, "--tls-bind-identity"])]);
  hubs.push(tlsHub, mtlsHub, boundHub);
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(hubs.map((h) => h.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const port = (hub: HubProcess): string => hub.target.slice(hub.target.lastIndexOf(":") + 1);
const client = (name: string): TlsOptions => ({
  caFile: join(dir, "ca.pem"),
  certFile: join(dir, `client-${name}.pem`),
  keyFile: join(dir, `client-${name}.key`),
});

/** Two agents registered with `options` converse over their Connect streams. */
async function talk(target: string, prefix: string, options: RegisterOptions): Promise<void> {
  const alice = await register(target, { name: `${prefix}-alice` }, undefined, options);
  const bob = await register(target, { name: `${prefix}-bob` }, undefined, options);
  clients.push(alice, bob);
  await Promise.all([alice.connect(), bob.connect()]);
  const inbox = new Collector(bob, true);
  const opened = await alice.openChannel({ type: "conversation", targets: [bob.agentId], waitUntilOpened: true });
  await alice.postText(opened.channel.channelId, "over TLS");
  await inbox.waitFor((e) => e.text === "over TLS", "alice's text over TLS");
}

/** A registration that fails in the transport (no hub refusal: the handshake failed). */
async function unreachable(target: string, options: RegisterOptions): Promise<void> {
  await assert.rejects(register(target, { name: "nobody" }, undefined, { ...options, callTimeoutMs: 5000 }), (err: unknown) => {
    assert.ok(err instanceof AgentNetError);
    assert.ok(err.domain === "", `a hub refusal instead of a transport failure: ${err.reason} ${err.message}`);
    return true;
  });
}

test("TLS: the bridge verifies the hub with the CA file, by IP, by name, and with a server-name override", async () => {
  const ca = { caFile: join(dir, "ca.pem") };
  await talk(tlsHub.target, "ts-tls-ip", { tls: ca }); // 127.0.0.1, an IP SAN of the certificate
  await talk(`localhost:${port(tlsHub)}`, "ts-tls-name", { tls: ca });
  await talk(tlsHub.target, "ts-tls-sni", { tls: { ...ca, serverName: "localhost" } });
});

test("TLS: plain text, an unknown CA and another expected name cannot reach the hub", async () => {
  await unreachable(tlsHub.target, {});
  await unreachable(tlsHub.target, { tls: {} });
  await unreachable(tlsHub.target, { tls: { caFile: join(certs(), "ca.pem") } });
  await unreachable(tlsHub.target, { tls: { caFile: join(dir, "ca.pem"), serverName: "hub.elsewhere.example" } });
});

test("mTLS: a client certificate of the hub's CA gets in, none is turned away", async () => {
  await talk(mtlsHub.target, "ts-mtls", { tls: client("ts-alice") });
  await unreachable(mtlsHub.target, { tls: { caFile: join(dir, "ca.pem") } });
});

test("mTLS with identity binding: the certificate names the only agent the connection may be", async () => {
  const bob = await register(boundHub.target, { name: "ts-bob" }, undefined, { tls: client("ts-bob") });
  clients.push(bob);
  await bob.connect();
  await assert.rejects(register(boundHub.target, { name: "ts-carol" }, undefined, { tls: client("ts-bob") }), (err: unknown) =>
    AgentNetError.is(err, Reason.PERMISSION_DENIED),
  );
});

test("tlsChannel refuses unreadable or mismatched files with INVALID_ARGUMENT naming them", () => {
  const notPem = join(dir, "not-a-certificate.txt");
  writeFileSync(notPem, "not a certificate\n");
  const cases: [string, TlsOptions][] = [
    ["missing CA", { caFile: join(dir, "nope.pem") }],
    ["CA not PEM", { caFile: notPem }],
    ["a key as CA", { caFile: join(dir, "server.key") }],
    ["cert without key", { certFile: join(dir, "client-ts-alice.pem") }],
    ["key without cert", { keyFile: join(dir, "client-ts-alice.key") }],
    ["key and cert swapped", { certFile: join(dir, "client-ts-alice.key"), keyFile: join(dir, "client-ts-alice.pem") }],
  ];
  for (const [what, options] of cases) {
    assert.throws(
      () => tlsChannel(options),
      (err: unknown) => AgentNetError.is(err, Reason.INVALID_ARGUMENT),
      what,
    );
  }
  assert.throws(() => tlsChannel({ caFile: join(dir, "nope.pem") }), /nope\.pem/);
});
