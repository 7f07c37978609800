// What the webhook tests share: the wrangler.toml text (for the queue settings the code must
// match), a receiver standing in for the consumer's outbound fetch (the consumer runs in the
// tests' isolate), and a delivery row ready for its first attempt.
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, expect, vi } from "vitest";
import { insertDelivery } from "../src/db/webhooks";
import { outbound } from "../src/routes/webhooks/consumer";
import { ADMIN, postJson } from "./helpers";

const files = import.meta.glob<string>("../wrangler.toml", {
  query: "?raw",
  import: "default",
  eager: true,
});
/** wrangler.toml as text. */
export const wranglerToml = files["../wrangler.toml"] ?? "";

export interface Received {
  url: string;
  headers: Headers;
  body: string;
}

/**
 * Replaces the consumer's outbound fetch for every test of the calling file: each request is
 * recorded in the returned array (emptied before each test) and answered by `answer` (200 "ok"
 * unless given).
 */
export function receiveDeliveries(
  answer: (r: Received) => Response | Promise<Response> = () => new Response("ok"),
): Received[] {
  const received: Received[] = [];
  beforeEach(() => {
    received.length = 0;
    vi.spyOn(outbound, "fetch").mockImplementation(async (request: Request) => {
      const r = { url: request.url, headers: request.headers, body: await request.text() };
      received.push(r);
      return answer(r);
    });
  });
  afterEach(() => vi.restoreAllMocks());
  return received;
}

/** Stores a delivery of a test `key.banned` payload to `endpointId`, ready for an attempt; its id. */
export async function insertTestDelivery(endpointId: string): Promise<string> {
  const id = `whd_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
  await insertDelivery(
    env.DB,
    {
      id,
      endpointId,
      eventId: `evt_${id.slice(4)}`,
      eventType: "key.banned",
      keyId: null,
      payload: '{"type":"key.banned"}',
    },
    Date.now(),
  );
  return id;
}

/** Creates a webhook endpoint through the operator API (201 expected); its id and secret. */
export async function createEndpoint(
  body: Record<string, unknown>,
): Promise<{ id: string; secret: string }> {
  const res = await postJson("/admin/v1/webhooks", body, ADMIN);
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; secret: string };
}
