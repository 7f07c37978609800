import { createApp } from "./app";

export { QuotaLimiter } from "./quota/limiter";
export { AuthShield } from "./quota/auth-shield";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
