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

// The hosts an endpoint may not name, in CIDR notation or as a domain suffix. docs/webhooks.md
// lists the same rows with what each block is (a test holds the two to the same rows); the code
// keeps only the blocks, which is all a refusal names, to keep the Worker's bundle small.

/**
 * IPv4 blocks refused: every block of the IANA IPv4 Special-Purpose Address Registry that is not
 * globally reachable, the registry's deprecated 6to4 relay block, and multicast (not a host).
 */
export const REFUSED_IPV4: readonly string[] = [
  "0.0.0.0/8", // "this network"
  "10.0.0.0/8", // private use
  "100.64.0.0/10", // shared address space (carrier-grade NAT)
  "127.0.0.0/8", // loopback
  "169.254.0.0/16", // link-local (cloud metadata services)
  "172.16.0.0/12", // private use
  "192.0.0.0/24", // IETF protocol assignments
  "192.0.2.0/24", // documentation (TEST-NET-1)
  "192.88.99.0/24", // deprecated 6to4 relay anycast
  "192.168.0.0/16", // private use
  "198.18.0.0/15", // benchmarking
  "198.51.100.0/24", // documentation (TEST-NET-2)
  "203.0.113.0/24", // documentation (TEST-NET-3)
  "224.0.0.0/4", // multicast
  "240.0.0.0/4", // reserved, and the limited broadcast address
];

/**
 * IPv6 blocks refused: everything outside global unicast, every block of the IANA IPv6
 * Special-Purpose Address Registry that is not globally reachable, the forms that carry an IPv4
 * address (the IPv4 address is what to register, and is checked as such), and the blocks of
 * cryptographic identifiers that no host answers at.
 */
export const REFUSED_IPV6: readonly string[] = [
  "::/128", // unspecified
  "::1/128", // loopback
  "::ffff:0:0/96", // IPv4-mapped
  "64:ff9b::/96", // IPv4/IPv6 translation (NAT64)
  "64:ff9b:1::/48", // IPv4/IPv6 translation, local use
  "100::/64", // discard-only
  "100:0:0:1::/64", // dummy prefix
  "2001::/23", // IETF protocol assignments
  "2001::/32", // Teredo (carries an IPv4 address)
  "2001:2::/48", // benchmarking
  "2001:10::/28", // ORCHID (deprecated identifiers)
  "2001:20::/28", // ORCHIDv2 (identifiers, not routed as addresses)
  "2001:30::/28", // drone remote ID entity tags (identifiers)
  "2001:db8::/32", // documentation
  "2002::/16", // 6to4 (carries an IPv4 address)
  "3fff::/20", // documentation
  "5f00::/16", // segment routing (SRv6) identifiers
  "fc00::/7", // unique local
  "fe80::/10", // link-local
  "ff00::/8", // multicast
  // The rest of the space outside global unicast (2000::/3) is not allocated to hosts.
  "::/3", // outside global unicast
  "4000::/2", // outside global unicast
  "8000::/1", // outside global unicast
];

/**
 * Inside the refused blocks, the ones the registries mark globally reachable (anycast services):
 * accepted.
 */
export const GLOBALLY_REACHABLE_WITHIN_REFUSED: readonly string[] = [
  "192.0.0.9/32", // Port Control Protocol anycast
  "192.0.0.10/32", // TURN anycast
  "192.88.99.2/32", // 6a44 relay anycast
  "2001:1::1/128", // Port Control Protocol anycast
  "2001:1::2/128", // TURN anycast
  "2001:1::3/128", // DNS-SD service registration anycast
  "2001:3::/32", // AMT
  "2001:4:112::/48", // AS112
];

/**
 * Names that resolve only inside a network, or never: the special-use domain names (IANA registry),
 * `.internal` (reserved for private use), and private-use suffixes in common use. A name under one
 * is refused with it.
 */
export const REFUSED_NAME_SUFFIXES: readonly string[] = [
  "localhost", // loopback
  "local", // multicast DNS, the local link only
  "home.arpa", // home networks
  "arpa", // infrastructure (reverse DNS: in-addr.arpa, ip6.arpa), no web hosts
  "alt", // names outside the DNS
  "internal", // private use
  "test", // testing
  "invalid", // never valid
  "example", // documentation
  "onion", // Tor onion services
  "intranet", // private use, by custom
  "lan", // private use, by custom
  "home", // private use, by custom
  "corp", // private use, by custom
  "private", // private use, by custom
  "localdomain", // private use, by custom
];
/** An address as a 128-bit number (IPv4 in the low 32 bits), and the bits it has. */
interface Address {
  value: bigint;
  bits: 32 | 128;
}

/** An IPv4 address in dotted decimal, as the URL parser writes every IPv4 spelling. */
const ipv4 = (text: string): Address => ({
  value: text.split(".").reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n),
  bits: 32,
});

/** An IPv6 address in hex groups, `::` allowed (as the URL parser writes it, without brackets). */
function ipv6(text: string): Address {
  const [head = "", tail] = text.split("::");
  const groups = (part: string) => (part ? part.split(":") : []);
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const all = [...front, ...new Array<string>(8 - front.length - back.length).fill("0"), ...back];
  return {
    value: all.reduce((n, g) => (n << 16n) | BigInt(Number.parseInt(g, 16)), 0n),
    bits: 128,
  };
}

interface Block {
  block: string;
  first: Address;
  prefix: number;
}

const blocksOf = (rows: readonly string[]): Block[] =>
  rows.map((block) => {
    const [address = "", prefix = ""] = block.split("/");
    return {
      block,
      first: address.includes(":") ? ipv6(address) : ipv4(address),
      prefix: Number(prefix),
    };
  });

const REFUSED_BLOCKS = blocksOf([...REFUSED_IPV4, ...REFUSED_IPV6]);
const REACHABLE_BLOCKS = blocksOf(GLOBALLY_REACHABLE_WITHIN_REFUSED);

function inBlock(address: Address, block: Block): boolean {
  if (address.bits !== block.first.bits) return false;
  const shift = BigInt(address.bits - block.prefix);
  return address.value >> shift === block.first.value >> shift;
}

/** The most specific refused block holding `address`, or null when it may be called. */
function refusedBlockOf(address: Address): Block | null {
  if (REACHABLE_BLOCKS.some((block) => inBlock(address, block))) return null;
  const holding = REFUSED_BLOCKS.filter((block) => inBlock(address, block));
  return holding.sort((a, b) => b.prefix - a.prefix)[0] ?? null;
}

/** The refused suffix `name` ends with (the longest), or null. */
const refusedSuffixOf = (name: string): string | null =>
  REFUSED_NAME_SUFFIXES.filter((suffix) => name === suffix || name.endsWith(`.${suffix}`)).sort(
    (a, b) => b.length - a.length,
  )[0] ?? null;

/**
 * The Unicode of a Punycode label's part after `xn--` (RFC 3492), or null when it is not valid
 * Punycode. The URL parser lets such a label through as it is.
 */
function punycodeDecoded(encoded: string): string | null {
  const base = 36;
  const delimiter = encoded.lastIndexOf("-");
  const output =
    delimiter > 0 ? [...encoded.slice(0, delimiter)].map((c) => c.codePointAt(0)!) : [];
  if (output.some((c) => c >= 0x80)) return null;
  let [n, i, bias] = [128, 0, 72];
  for (let at = delimiter > 0 ? delimiter + 1 : 0; at < encoded.length; ) {
    const before = i;
    let w = 1;
    for (let k = base; ; k += base) {
      if (at >= encoded.length) return null;
      const c = encoded.charCodeAt(at++);
      const digit = c >= 0x30 && c <= 0x39 ? c - 22 : c >= 0x61 && c <= 0x7a ? c - 0x61 : base;
      if (digit >= base) return null;
      i += digit * w;
      const t = k <= bias ? 1 : k >= bias + 26 ? 26 : k - bias;
      if (digit < t) break;
      w *= base - t;
      if (i > 0x10ffff * (output.length + 1)) return null;
    }
    const length = output.length + 1;
    let delta = before === 0 ? Math.floor((i - before) / 700) : Math.floor((i - before) / 2);
    delta += Math.floor(delta / length);
    let k = 0;
    for (; delta > ((base - 1) * 26) >> 1; k += base) delta = Math.floor(delta / (base - 1));
    bias = k + Math.floor((base * delta) / (delta + 38));
    n += Math.floor(i / length);
    if (n > 0x10ffff) return null;
    i %= length;
    output.splice(i++, 0, n);
  }
  return String.fromCodePoint(...output);
}

/**
 * Whether every `xn--` label of `host` is the one the URL parser makes of its Unicode: valid
 * Punycode (the parser lets an invalid label such as `xn--a` through as it is) of a name that is
 * not plain ASCII and is allowed in a host name. Any other names no host anyone can register.
 */
function punycodeIsCanonical(host: string): boolean {
  const labels = host.split(".");
  if (!labels.some((label) => label.startsWith("xn--"))) return true;
  const unicode: string[] = [];
  for (const label of labels) {
    // The parser has lowercased the host, so the decoder reads lowercase letters only.
    const decoded = label.startsWith("xn--") ? punycodeDecoded(label.slice(4)) : label;
    if (decoded === null) return false;
    unicode.push(decoded);
  }
  const again = `https://${unicode.join(".")}/`;
  return URL.canParse(again) && new URL(again).hostname === host;
}

const LOCAL_RECEIVER_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * Why `text` cannot be a webhook endpoint's URL (a sentence for the `url: …` of a 400), or null
 * when it can. `localReceivers` also admits `http://localhost`, `http://127.0.0.1` and
 * `http://[::1]`, any port.
 */
export function webhookUrlProblem(
  text: string,
  { localReceivers }: { localReceivers: boolean },
): string | null {
  if (text.length > MAX_WEBHOOK_URL_LENGTH)
    return `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  // The parser drops spaces around a URL and tabs and line breaks anywhere in it, and escapes
  // other spaces: the text stored and shown (a list, the CLI's table) would not be the URL
  // checked and called, and a line break in it would break every table that prints it.
  if (/[\u0000-\u0020\u007f]/.test(text)) return "must not contain spaces or control characters";
  // The same for a lone surrogate: the parser sends it as U+FFFD (%EF%BF%BD).
  if (!text.isWellFormed()) return "must be well-formed Unicode (no lone surrogates)";
  if (!URL.canParse(text)) return "must be an absolute URL (https://…)";
  const url = new URL(text);
  if (url.username || url.password) return "must not contain credentials (user:password@)";
  // An empty fragment ("…/x#") leaves url.hash empty; the serialized URL still shows its "#".
  if (url.hash || url.href.includes("#")) return "must not have a fragment (#…)";
  // No connection can be made to port 0: every delivery would fail until the endpoint went dead.
  if (url.port === "0") return "must not use port 0";
  // The parser has already lowercased the host and turned every IPv4 spelling (0x7f.1, 2130706433)
  // into dotted decimal, and IPv6 into its compressed form in brackets.
  const host = url.hostname;
  if (localReceivers && url.protocol === "http:" && LOCAL_RECEIVER_HOSTS.has(host)) return null;
  if (url.protocol !== "https:")
    return localReceivers
      ? "must use https: (http: only for localhost, 127.0.0.1 or [::1] while developing)"
      : "must use https:";
  if (host.startsWith("[") || /^[0-9.]+$/.test(host)) {
    const address = host.startsWith("[") ? ipv6(host.slice(1, -1)) : ipv4(host);
    const refused = refusedBlockOf(address);
    return refused
      ? `must name a public host (${host} is in ${refused.block}: private, loopback, link-local and other special-purpose addresses are refused)`
      : null;
  }
  // Every trailing dot goes ("localhost..", "printer.local..."): the parser keeps them, and
  // the name they end is what the suffix and single-label rules are about.
  const name = host.replace(/\.+$/, "");
  if (!name.includes("."))
    return `must name a public host (${host} is a single-label name, resolved only inside a network)`;
  const suffix = refusedSuffixOf(name);
  if (suffix) return `must name a public host (.${suffix} names are not resolved on the Internet)`;
  if (!punycodeIsCanonical(name))
    return `must name a public host (${host} has a label that is not valid Punycode (xn--…))`;
  return null;
}
