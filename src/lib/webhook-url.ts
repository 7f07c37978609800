/**
 * Which URLs a webhook endpoint may have: `https:` on a public host, with no credentials in it.
 * Deliveries are made by the service, so an endpoint aimed at a private, loopback or link-local
 * address (or a name that only resolves inside a network) would turn it into a probe of networks
 * the operator never meant to reach. The one exception is a local receiver while developing:
 * `http://localhost` (or 127.0.0.1, [::1]), only when the deployment allows it (the
 * WEBHOOK_LOCAL_RECEIVERS setting, refused outside ENVIRONMENT=local).
 */

/** The longest URL an endpoint may have. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/** Names that resolve only inside a network, or never: special-use and private-use suffixes. */
const NON_PUBLIC_SUFFIXES = [
  "localhost",
  "local",
  "internal",
  "intranet",
  "lan",
  "home",
  "corp",
  "private",
  "localdomain",
  "home.arpa",
  "test",
  "invalid",
  "example",
  "onion",
];

/** IPv4 ranges that are not public unicast: [first address, prefix length]. */
const NON_PUBLIC_V4: readonly (readonly [string, number])[] = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

const v4Number = (address: string): number =>
  address.split(".").reduce((n, part) => n * 256 + Number(part), 0);

function isPublicV4(address: string): boolean {
  const n = v4Number(address);
  return !NON_PUBLIC_V4.some(([first, bits]) => {
    const size = 2 ** (32 - bits);
    const start = v4Number(first);
    return n >= start && n < start + size;
  });
}

/** The eight 16-bit groups of an IPv6 address as the URL parser writes it (compressed, lowercase). */
function v6Groups(address: string): number[] {
  const [head = "", tail] = address.split("::");
  const parse = (part: string) => (part ? part.split(":").map((g) => Number.parseInt(g, 16)) : []);
  const front = parse(head);
  const back = tail === undefined ? [] : parse(tail);
  return [...front, ...new Array(8 - front.length - back.length).fill(0), ...back];
}

/**
 * Public IPv6 is global unicast (2000::/3) outside documentation (2001:db8::/32 and 3fff::/20),
 * 6to4 (2002::/16, which embeds any IPv4 address) and Teredo (2001::/32); everything else
 * (loopback, unique local fc00::/7, link-local fe80::/10, multicast, IPv4-mapped ::ffff:0:0/96,
 * NAT64 64:ff9b::/96) is not.
 */
function isPublicV6(address: string): boolean {
  const [a = 0, b = 0] = v6Groups(address);
  if ((a & 0xe000) !== 0x2000) return false;
  if (a === 0x2001 && (b === 0x0db8 || b === 0)) return false;
  if (a === 0x3fff && b <= 0x0fff) return false;
  return a !== 0x2002;
}

const LOCAL_RECEIVER_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * Why `text` cannot be a webhook endpoint's URL (a sentence for the `url: …` of a 400), or null
 * when it can. `localReceivers` also admits `http://localhost`, `http://127.0.0.1` and
 * `http://[::1]`, any port.
 */
export function webhookUrlProblem(text: string, localReceivers: boolean): string | null {
  if (text.length > MAX_WEBHOOK_URL_LENGTH)
    return `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  // The parser drops spaces around a URL and tabs and line breaks anywhere in it, and escapes
  // other spaces: the text stored and shown (a list, the CLI's table) would not be the URL
  // checked and called, and a line break in it would break every table that prints it.
  if (/[\u0000-\u0020\u007f]/.test(text)) return "must not contain spaces or control characters";
  if (!URL.canParse(text)) return "must be an absolute URL (https://…)";
  const url = new URL(text);
  if (url.username || url.password) return "must not contain credentials (user:password@)";
  // An empty fragment ("…/x#") leaves url.hash empty; the serialized URL still shows its "#".
  if (url.hash || url.href.includes("#")) return "must not have a fragment (#…)";
  // The parser has already lowercased the host and turned every IPv4 spelling (0x7f.1, 2130706433)
  // into dotted decimal, and IPv6 into its compressed form in brackets.
  const host = url.hostname;
  if (localReceivers && url.protocol === "http:" && LOCAL_RECEIVER_HOSTS.has(host)) return null;
  if (url.protocol !== "https:")
    return localReceivers
      ? "must use https: (http: only for localhost, 127.0.0.1 or [::1] while developing)"
      : "must use https:";
  if (host.startsWith("[")) {
    return isPublicV6(host.slice(1, -1))
      ? null
      : `must name a public host (${host} is a private, loopback, link-local or reserved address)`;
  }
  if (/^[0-9.]+$/.test(host)) {
    return isPublicV4(host)
      ? null
      : `must name a public host (${host} is a private, loopback, link-local or reserved address)`;
  }
  // Every trailing dot goes ("localhost..", "printer.local..."): the parser keeps them, and
  // the name they end is what the suffix and single-label rules are about.
  const name = host.replace(/\.+$/, "");
  if (!name.includes("."))
    return `must name a public host (${host} is a single-label name, resolved only inside a network)`;
  const suffix = NON_PUBLIC_SUFFIXES.find((s) => name === s || name.endsWith(`.${s}`));
  if (suffix) return `must name a public host (.${suffix} names are not resolved on the Internet)`;
  return null;
}
