// @ts-check
// The key an operator's tool issues itself to call the public API (the smoke test, seeding through
// the API): one key per tool, found by its name and reused. Each run rolls its secret (the old one
// ends at once: nobody kept it) and enables it; at the end the tool disables it again. Revoking
// would leave one more revoked key in the list for good at every run; this leaves one key.

/**
 * Sends an admin request: `path` under the API's origin, with the admin token.
 * @typedef {(path: string, init?: { method?: string, body?: string }) => Promise<Response>} AdminRequest
 */

/**
 * The JSON body of `res`, or an Error saying what came instead of `status`.
 * @param {Response} res @param {number} status @param {string} what
 * @returns {Promise<any>}
 */
async function bodyOrThrow(res, status, what) {
  if (res.status !== status)
    throw new Error(
      `${what}: expected ${status}, got ${res.status}: ${(await res.text()).slice(0, 300)}`,
    );
  return res.json();
}

/**
 * The tool's key named `name` with a fresh secret, enabled: the one listed (active or disabled)
 * or, when there is none, a new free-plan key. Throws naming the admin call that failed.
 * @param {AdminRequest} request @param {string} name
 * @returns {Promise<{ id: string, key: string }>}
 */
export async function serviceKeyOrThrow(request, name) {
  const listed = await bodyOrThrow(
    await request(`/admin/v1/keys?q=${encodeURIComponent(name)}&limit=100`),
    200,
    "GET /admin/v1/keys",
  );
  /** @type {{ id: string, name: string, status: string } | undefined} */
  const reusable = listed.data.find(
    (/** @type {{ name: string, status: string }} */ k) =>
      k.name === name && (k.status === "active" || k.status === "disabled"),
  );
  if (!reusable)
    return bodyOrThrow(
      await request("/admin/v1/keys", {
        method: "POST",
        body: JSON.stringify({ name, plan: "free" }),
      }),
      201,
      "POST /admin/v1/keys",
    );
  const path = `/admin/v1/keys/${encodeURIComponent(reusable.id)}`;
  if (reusable.status === "disabled")
    await bodyOrThrow(
      await request(path, { method: "PATCH", body: JSON.stringify({ enabled: true }) }),
      200,
      `PATCH ${path}`,
    );
  return bodyOrThrow(
    await request(`${path}/roll`, {
      method: "POST",
      body: JSON.stringify({ gracePeriodSeconds: 0 }),
    }),
    201,
    `POST ${path}/roll`,
  );
}

/**
 * Disables the tool's key after its run: refused (401) until the next run enables it.
 * @param {AdminRequest} request @param {string} id
 */
export async function disableServiceKeyOrThrow(request, id) {
  const path = `/admin/v1/keys/${encodeURIComponent(id)}`;
  await bodyOrThrow(
    await request(path, { method: "PATCH", body: JSON.stringify({ enabled: false }) }),
    200,
    `PATCH ${path}`,
  );
}
