// What the browser tests add to the pages they drive (see page.evaluateOnNewDocument there).
interface Window {
  /** Every Content-Security-Policy violation the page met: "<directive> <blocked URI>". */
  __cspViolations: string[];
}
