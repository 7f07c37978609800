// Bundle-size shim, wired in by `[alias]` in wrangler.toml: zod re-exports all ~40 of its locales
// through the `z` namespace, which esbuild cannot tree-shake (~38 KiB gzipped). The service only
// uses zod's default English messages (imported by zod directly), so the namespace is empty here.
export {};
