/**
 * Test support: a throw-away `redis-server` (no persistence) on a free loopback port
 * in a private directory, for hubs started with `--store redis://...`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A running redis-server. */
export interface RedisProcess {
  /** `redis://127.0.0.1:<port>/<db>`. */
  url(db: number): string;
  /** SIGKILL it, wait for exit and remove its directory. */
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no free port");
  return address.port;
}

/** Whether the server on `port` answers PING. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.setEncoding("utf8").on("data", (chunk: string) => {
      reply += chunk;
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Start redis-server (it must be on PATH: `make redis-server`) and wait until it answers PING. */
export async function startRedis(): Promise<RedisProcess> {
  const dir = await mkdtemp(join(tmpdir(), "agentnet-ts-redis-"));
  for (let attempt = 0; attempt < 3; attempt++) {
    // the free port may be taken between probing and binding: try another
    const port = await freePort();
    const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir];
    const child = spawn("redis-server", args, { stdio: "ignore" });
    let spawnError: Error | undefined;
    child.once("error", (err) => {
      spawnError = err;
    });
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !exited(child) && spawnError === undefined) {
      if (await ping(port)) {
        return {
          url: (db) => `redis://127.0.0.1:${port}/${db}`,
          async stop(): Promise<void> {
            if (!exited(child)) {
              const gone = new Promise((resolve) => child.once("exit", resolve));
              child.kill("SIGKILL");
              await gone;
            }
            await rm(dir, { recursive: true, force: true });
          },
        };
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (spawnError !== undefined) {
      await rm(dir, { recursive: true, force: true });
      throw new Error(`redis-server could not start (run \`make redis-server\` to install it): ${spawnError.message}`);
    }
    if (!exited(child)) child.kill("SIGKILL");
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error("redis-server did not answer PING on three free ports");
}
