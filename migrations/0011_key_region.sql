-- Where the key's quota object is created (a Durable Object location hint), or NULL: where its
-- first request comes from. No CHECK: the admin API validates it against the list in
-- src/schemas/region.ts, so a hint Cloudflare adds needs no table rebuild.
ALTER TABLE api_keys ADD COLUMN region TEXT;
