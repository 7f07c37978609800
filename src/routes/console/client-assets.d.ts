// The console's browser files are bundled as text (the Text rule in wrangler.toml).
declare module "*.client.js" {
  const text: string;
  export default text;
}
declare module "*.client.css" {
  const text: string;
  export default text;
}
