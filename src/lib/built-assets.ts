/**
 * The text of a file the build command (scripts/docs-assets.mjs) writes into the static assets at
 * `path`, a path under a route only the Worker answers; throws when the build wrote none.
 */
export async function readBuiltAssetOrThrow(assets: Fetcher, path: string): Promise<string> {
  const res = await assets.fetch(new URL(path, "https://assets.invalid"));
  if (!res.ok)
    throw new Error(
      `${path} answered ${res.status}: the build command (scripts/docs-assets.mjs) writes it`,
    );
  return res.text();
}
