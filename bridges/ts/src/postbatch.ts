import type { Ack, ConnectRequest, Post } from "./gen";

/**
 * The most posts one frame may carry: the hub's `Welcome.max_post_batch` (0 = the
 * hub knows no PostBatch), lowered by the client's `maxPostBatch` option
 * (undefined = the hub's limit; 0 = single Posts). 1 means a frame per Post.
 *
 * @internal
 */
export function postLimit(hubMax: number, option: number | undefined): number {
  const limit = option === undefined ? hubMax : Math.min(hubMax, option);
  return Math.max(1, Math.floor(limit));
}

/**
 * Pack the first of the queued posts into one frame: up to `limit` of them in a
 * PostBatch, or a plain Post when only one goes (one queued, or `limit` 1) and no
 * acks ride along. `ack` (undefined = none) rides in the frame, a PostBatch then even
 * of one post. Returns the frame and how many posts it carries (0 and no frame for an
 * empty queue).
 *
 * @internal
 */
export function packPosts(queue: readonly Post[], limit: number, ack?: Ack): { frame: ConnectRequest | undefined; count: number } {
  const count = Math.min(queue.length, Math.max(1, limit));
  if (count === 0) return { frame: undefined, count };
  const first = queue[0] as Post;
  if (count === 1 && ack === undefined) return { frame: { frame: { $case: "post", value: first } }, count };
  return { frame: { frame: { $case: "postBatch", value: { posts: queue.slice(0, count), ack } } }, count };
}
