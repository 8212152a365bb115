/**
 * A loopback TCP port a test holds across hub restarts, forwarding each connection to
 * wherever the hub listens now.
 *
 * Restarting a hub "on the same port" after it exited races with every other process on
 * the machine (the port is free in between). Instead the hub always starts on port 0,
 * clients dial this forwarder's port (bound once, held until close()), and the test points
 * the forwarder at each new hub.
 */
import { once } from "node:events";
import { type Server, type Socket, connect, createServer } from "node:net";

export class TcpForwarder {
  private upstream: { host: string; port: number } | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly server: Server = createServer({ noDelay: true }, (client) => this.accept(client));

  private constructor() {}

  /** A forwarder listening on `127.0.0.1:<free port>`, refusing connections until pointTo(). */
  static async listen(): Promise<TcpForwarder> {
    const forwarder = new TcpForwarder();
    forwarder.server.listen(0, "127.0.0.1");
    await once(forwarder.server, "listening");
    return forwarder;
  }

  /** `127.0.0.1:<port>` for clients to dial (stable for the forwarder's life). */
  get target(): string {
    const address = this.server.address();
    if (address === null || typeof address === "string") throw new Error("the forwarder is not listening");
    return `127.0.0.1:${address.port}`;
  }

  /** Forward new connections to `host:port` (undefined: refuse them, as a stopped hub would). */
  pointTo(target: string | undefined): void {
    if (target === undefined) {
      this.upstream = undefined;
      return;
    }
    const colon = target.lastIndexOf(":");
    this.upstream = { host: target.slice(0, colon), port: Number(target.slice(colon + 1)) };
  }

  /** Close every connection forwarded so far (new ones go to the current upstream). */
  dropConnections(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  /** Stop listening and close every forwarded connection. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private accept(client: Socket): void {
    this.track(client);
    if (this.upstream === undefined) {
      client.destroy(); // the hub is down: the client sees its connection closed and retries
      return;
    }
    const upstream = this.track(connect({ ...this.upstream, noDelay: true }));
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) socket.once("close", end).on("error", end);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  private track(socket: Socket): Socket {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    return socket;
  }
}
