/**
 * Test support: run a real hub (`python -m hubsvc`) in a subprocess.
 *
 * The interpreter is `$AGENTNET_PYTHON`, else `<repo>/.venv/bin/python`
 * (created by `make setup`). The hub runs with the repository root as its working
 * directory, or `$AGENTNET_HUB_DIR` (e.g. an exported checkout of another commit).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before } from "node:test";
import type { Client } from "../src";
import { TcpForwarder } from "./forwarder";

/** A running hub. */
export interface HubProcess {
  /**
   * `127.0.0.1:<port>` of a forwarder to the hub: the same across restart(), while each
   * hub process listens on a port of its own.
   */
  readonly target: string;
  /** Its data directory (removed by stop()). */
  readonly dir: string;
  /**
   * Stop it and start it again on the same database (and target). SIGKILL simulates
   * a crash (and is fast: on SIGTERM the hub waits its 5 s grace period for open
   * Connect streams before closing them).
   */
  restart(signal?: "SIGTERM" | "SIGKILL"): Promise<void>;
  /** SIGKILL it (a crash) and leave it down: its target refuses connections from then on. */
  kill(): Promise<void>;
  /** SIGTERM, wait for exit (SIGKILL after 10 s), remove the data directory. */
  stop(): Promise<void>;
}

/** The repository root: the nearest ancestor of this file holding `hubsvc/` and `proto/`. */
export function repoRoot(): string {
  let dir = __dirname;
  for (;;) {
    if (existsSync(join(dir, "hubsvc")) && existsSync(join(dir, "proto"))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no repository root (with hubsvc/ and proto/) above ${__dirname}`);
    dir = parent;
  }
}

/** The Python interpreter that runs the hub. */
export function pythonPath(root = repoRoot()): string {
  return process.env["AGENTNET_PYTHON"] || join(root, ".venv", "bin", "python");
}

function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

async function terminate(child: ChildProcess, signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  if (!(await waitExit(child, 10_000))) {
    child.kill("SIGKILL");
    await waitExit(child, 5_000);
  }
}

/** Hubs still running; killed if the test process exits without stopping them (e.g. a timeout). */
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Spawn `python -m hubsvc` on a free port and resolve with the child and its address once it listens. */
function spawnHub(dir: string, extraArgs: string[]): Promise<{ child: ChildProcess; target: string }> {
  const root = repoRoot();
  const cwd = process.env["AGENTNET_HUB_DIR"] || root;
  const args = ["-m", "hubsvc", "--port", "0", "--db", join(dir, "hub.db"), "--data-dir", dir];
  const child = spawn(pythonPath(root), [...args, "--log-level", "WARNING", ...extraArgs], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  live.add(child);
  child.once("exit", () => live.delete(child));
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  return new Promise((resolve, reject) => {
    let stdout = "";
    // Generous: on a loaded machine (CI runs several test processes on two cores) importing the hub can be slow.
    const timer = setTimeout(() => fail(new Error("the hub did not report its port within 45 s")), 45_000);
    function fail(err: Error): void {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new Error(`${err.message}\n--- hub stderr ---\n${stderr}`));
    }
    const onError = (err: Error): void => fail(err);
    const onExit = (code: number | null, signal: string | null): void =>
      fail(new Error(`the hub exited early (code ${code}, signal ${signal})`));
    child.once("error", onError);
    child.once("exit", onExit);
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      const m = /agentnet-hub listening on \S+:(\d+)/.exec(stdout);
      if (m !== null) {
        clearTimeout(timer);
        child.off("error", onError);
        child.off("exit", onExit);
        stdout = "";
        resolve({ child, target: `127.0.0.1:${m[1]}` });
      }
    });
  });
}

/** Start a hub on a free port with a fresh database; resolves once it listens. */
export async function startHub(extraArgs: string[] = []): Promise<HubProcess> {
  const dir = await mkdtemp(join(tmpdir(), "agentnet-ts-"));
  const forwarder = await TcpForwarder.listen();
  let current: { child: ChildProcess; target: string };
  try {
    current = await spawnHub(dir, extraArgs);
  } catch (err) {
    await forwarder.close();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  forwarder.pointTo(current.target);
  return {
    target: forwarder.target,
    dir,
    async restart(signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<void> {
      forwarder.pointTo(undefined); // refused while down, whoever takes the old port
      await terminate(current.child, signal);
      current = await spawnHub(dir, extraArgs);
      forwarder.pointTo(current.target);
    },
    async kill(): Promise<void> {
      forwarder.pointTo(undefined);
      await terminate(current.child, "SIGKILL");
    },
    async stop(): Promise<void> {
      await forwarder.close();
      await terminate(current.child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A hub that clients dial directly, without a forwarder (so it cannot restart). */
export interface DirectHub {
  /** `127.0.0.1:<port>` the hub itself listens on. */
  readonly target: string;
  /** Its data directory (removed by stop()). */
  readonly dir: string;
  /** SIGTERM, wait for exit (SIGKILL after 10 s), remove the data directory. */
  stop(): Promise<void>;
}

/**
 * Start a hub on a free port with a fresh database, for clients to dial directly:
 * for benchmarks, where startHub()'s forwarder would copy every byte on the
 * clients' own event loop.
 */
export async function startDirectHub(extraArgs: string[] = []): Promise<DirectHub> {
  const dir = await mkdtemp(join(tmpdir(), "agentnet-ts-"));
  let child: ChildProcess;
  let target: string;
  try {
    ({ child, target } = await spawnHub(dir, extraArgs));
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    target,
    dir,
    async stop(): Promise<void> {
      await terminate(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** What useHub() gives a test file. */
export interface TestHub {
  /**
   * The file's running hub. Its members may only be used once before() has run
   * (inside tests and later hooks), not while the file loads.
   */
  readonly hub: HubProcess;
  /** Clients to close (before the hub stops) when the file's tests are done: push each one. */
  readonly clients: Client[];
}

/**
 * Register node:test hooks for a test file: before() starts a hub (startHub(extraArgs)),
 * after() closes every client in `clients` and then stops the hub.
 */
export function useHub(extraArgs: string[] = []): TestHub {
  let running: HubProcess | undefined;
  const clients: Client[] = [];
  const current = (): HubProcess => {
    if (running === undefined) throw new Error("useHub(): the hub is not running yet (use it inside tests)");
    return running;
  };
  before(async () => {
    running = await startHub(extraArgs);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await running?.stop();
  });
  const hub: HubProcess = {
    get target(): string {
      return current().target;
    },
    get dir(): string {
      return current().dir;
    },
    restart: (signal) => current().restart(signal),
    kill: () => current().kill(),
    stop: () => current().stop(),
  };
  return { hub, clients };
}
