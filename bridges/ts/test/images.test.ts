import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, EventType, imagesOf, Reason, registerHuman } from "../src";
import { useHub } from "../testkit/hub";
import { Collector } from "../testkit/wait";

const { hub, clients } = useHub();

test("images: a TS participant sends a text with images and the other reads them back", async () => {
  const alice = await registerHuman(hub.target, { name: "ts-img-a" });
  const bob = await registerHuman(hub.target, { name: "ts-img-b" });
  clients.push(alice, bob);
  await Promise.all([alice.connect(), bob.connect()]);
  const inbox = new Collector(bob, true);
  const opened = await alice.openChannel({ type: "conversation", targets: [bob.name], waitUntilOpened: true });
  const channelId = opened.channel.channelId;
  const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
  const sent = await alice.postText(channelId, "look", {
    images: [{ url: "https://example.com/cat.png", detail: "low" }, { data: png, mediaType: "image/png" }],
  });
  const got = await inbox.waitFor((e) => e.envelopeId === sent.envelopeId, "bob to receive the images");
  assert.equal(got.eventType, EventType.TEXT);
  assert.deepEqual(imagesOf(got), [
    { url: "https://example.com/cat.png", detail: "low" },
    { data: png, mediaType: "image/png" },
  ]);
  await assert.rejects(
    alice.postText(channelId, "bad", { images: [{ data: png }] }),
    (err: unknown) => AgentNetError.is(err, Reason.INVALID_ARGUMENT),
  );
});
