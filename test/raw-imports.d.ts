// Vite's `?raw` imports (a file's text, read at build time): the tests read the console's static
// files this way, since the Worker does not serve them (Workers Static Assets does).
declare module "*?raw" {
  const text: string;
  export default text;
}
