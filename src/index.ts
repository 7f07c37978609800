import { createApp } from "./app";

export { AuthShield } from "./objects/auth-shield";
export { QuotaHolder } from "./objects/quota-holder";
export { QuotaLimiter } from "./objects/quota-limiter";

const app = createApp();

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
} satisfies ExportedHandler<Env>;
