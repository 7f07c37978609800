import { createApp } from "./app";

export { AuthShield } from "./objects/auth-shield";
export { QuotaLimiter } from "./objects/quota-limiter";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
