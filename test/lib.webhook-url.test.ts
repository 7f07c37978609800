// Which URLs a webhook endpoint may have: https on a public host, no credentials; http to
// localhost only where local receivers are allowed.
/// <reference types="vite/client" />
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  GLOBALLY_REACHABLE_WITHIN_REFUSED,
  REFUSED_IPV4,
  REFUSED_IPV6,
  REFUSED_NAME_SUFFIXES,
  webhookUrlProblem,
} from "../src/lib/webhook-url";

// Read at transform time by Vite.
const docs = import.meta.glob<string>("../docs/webhooks.md", {
  query: "?raw",
  import: "default",
  eager: true,
});
const webhooksMd = docs["../docs/webhooks.md"] ?? "";

/** The rows of the docs' table whose header row starts with `| ${firstColumn} |`: [cell, cell]. */
function docsTableRows(firstColumn: string): string[][] {
  const lines = webhooksMd.split("\n");
  const header = lines.findIndex((line) => line.startsWith(`| ${firstColumn} |`));
  expect(header, `a table headed "${firstColumn}" in docs/webhooks.md`).toBeGreaterThan(-1);
  const rows: string[][] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
  }
  return rows;
}

describe("the refused hosts, listed once", () => {
  it.each([
    ["IPv4 block", REFUSED_IPV4, ""],
    ["IPv6 block", REFUSED_IPV6, ""],
    ["accepted block", GLOBALLY_REACHABLE_WITHIN_REFUSED, ""],
    ["names under", REFUSED_NAME_SUFFIXES, "."],
  ] as const)("docs/webhooks.md's table '%s' is the code's, row for row", (column, table, dot) => {
    const rows = docsTableRows(column);
    expect(rows.map(([block]) => block)).toEqual(table.map((block) => `\`${dot}${block}\``));
    for (const [block, what] of rows) expect(what, `what ${block} is`).toMatch(/\w/);
  });

  it("every refused block's first and last address is refused, naming a block; every accepted block's is accepted", () => {
    const v4 = (n: bigint) => [24n, 16n, 8n, 0n].map((s) => (n >> s) & 255n).join(".");
    const v6 = (n: bigint) =>
      `[${[112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => ((n >> s) & 0xffffn).toString(16)).join(":")}]`;
    /** A block's first and last address, as a URL writes them. */
    const ends = (block: string) => {
      const [address = "", prefix = ""] = block.split("/");
      const isV6 = address.includes(":");
      const first = isV6
        ? BigInt(`0x${expandV6(address)}`)
        : address.split(".").reduce((n, p) => (n << 8n) | BigInt(p), 0n);
      const last = first + (1n << BigInt((isV6 ? 128 : 32) - Number(prefix))) - 1n;
      return [first, last].map(isV6 ? v6 : v4);
    };
    const accepted = new Set(GLOBALLY_REACHABLE_WITHIN_REFUSED.flatMap(ends));
    for (const row of [...REFUSED_IPV4, ...REFUSED_IPV6])
      for (const host of ends(row))
        if (!accepted.has(host))
          expect(webhookUrlProblem(`https://${host}/`, { localReceivers: false }), host).toMatch(
            /^must name a public host \(.* is in [0-9a-f.:]+\/\d+: /,
          );
    for (const host of accepted)
      expect(webhookUrlProblem(`https://${host}/`, { localReceivers: false }), host).toBeNull();
  });

  it("a Unicode host name the URL parser encodes (xn--…) is accepted", () => {
    const letter = fc.constantFrom(..."abcdeéüößçñåøłžšяжшλπσ中文日本語한국ëàî0123456789");
    const label = fc.array(letter, { minLength: 1, maxLength: 12 }).map((cs) => cs.join(""));
    fc.assert(
      fc.property(label, label, (a, b) => {
        const url = `https://${a}.${b}.com/`;
        fc.pre(URL.canParse(url));
        expect(
          webhookUrlProblem(new URL(url).href, { localReceivers: false }),
          new URL(url).hostname,
        ).toBeNull();
      }),
    );
  });
});

/** The 32 hex digits of a compressed IPv6 address. */
function expandV6(text: string): string {
  const [head = "", tail] = text.split("::");
  const parts = (p: string) => (p ? p.split(":") : []);
  const front = parts(head);
  const back = tail === undefined ? [] : parts(tail);
  return [...front, ...Array(8 - front.length - back.length).fill("0"), ...back]
    .map((g) => g.padStart(4, "0"))
    .join("");
}

describe("webhook endpoint URLs", () => {
  it.each([
    "https://hooks.example.com/animal-store",
    "https://hooks.example.com:8443/a?b=c",
    "https://93.184.216.34/hook",
    "https://[2606:4700::1111]/hook",
    "https://xn--bcher-kva.example.org/",
    "https://xn--mnchen-3ya.de/",
    // Just outside refused blocks, and the globally reachable blocks inside them.
    "https://1.1.1.1/",
    "https://9.255.255.255/",
    "https://11.0.0.0/",
    "https://100.63.255.255/",
    "https://100.128.0.0/",
    "https://172.32.0.1/",
    "https://192.0.0.9/",
    "https://192.0.0.10/",
    "https://192.0.3.1/",
    "https://192.31.196.1/",
    "https://198.20.0.1/",
    "https://223.255.255.255/",
    "https://[2001:1::1]/",
    "https://[2001:1::3]/",
    "https://[2001:3::1]/",
    "https://[2001:4:112::1]/",
    "https://[2001:200::1]/",
    "https://[2001:db9::1]/",
    "https://[2003::1]/",
    "https://[2a00:1450:4001::200e]/",
    "https://[3fff:1000::1]/",
  ])("accepts %s", (url) => {
    expect(webhookUrlProblem(url, { localReceivers: false })).toBeNull();
  });

  it.each([
    ["not a URL", "hooks.example.com/x", /absolute URL/],
    ["http", "http://hooks.example.com/x", /^must use https:$/],
    ["ftp", "ftp://hooks.example.com/x", /https/],
    ["credentials", "https://user:pw@hooks.example.com/x", /credentials/],
    ["a user alone", "https://user@hooks.example.com/x", /credentials/],
    ["a fragment", "https://hooks.example.com/x#y", /fragment/],
    ["port 0", "https://hooks.example.com:0/x", /port 0/],
    ["port 0, spelled 00", "https://hooks.example.com:00/x", /port 0/],
    ["too long", `https://hooks.example.com/${"a".repeat(2048)}`, /at most 2048/],
    ["loopback", "https://127.0.0.1/x", /127\.0\.0\.1 is in 127\.0\.0\.0\/8: private/],
    ["loopback in hex", "https://0x7f.1/x", /127\.0\.0\.1/],
    ["loopback as a number", "https://2130706433/x", /127\.0\.0\.1/],
    ["10/8", "https://10.1.2.3/x", /private/],
    ["172.16/12", "https://172.31.255.255/x", /private/],
    ["192.168/16", "https://192.168.1.1/x", /private/],
    ["link-local (metadata)", "https://169.254.169.254/latest", /private/],
    ["CGNAT", "https://100.64.0.1/x", /private/],
    ["unspecified", "https://0.0.0.0/x", /private/],
    ["multicast", "https://224.0.0.1/x", /private/],
    ["IPv6 loopback", "https://[::1]/x", /\[::1\] is in ::1\/128:/],
    ["IPv6 unique local", "https://[fd00::1]/x", /private/],
    ["IPv6 link-local", "https://[fe80::1]/x", /private/],
    ["IPv4-mapped IPv6", "https://[::ffff:127.0.0.1]/x", /private/],
    ["6to4", "https://[2002:7f00:1::]/x", /private/],
    ["documentation IPv6", "https://[2001:db8::1]/x", /private/],
    ["localhost", "https://localhost/x", /single-label/],
    ["a .localhost name", "https://app.localhost/x", /\.localhost/],
    ["a .local name", "https://printer.local/x", /\.local names/],
    ["a .internal name", "https://metadata.google.internal/x", /\.internal/],
    ["home.arpa", "https://nas.home.arpa/x", /\.home\.arpa/],
    ["a single label", "https://intranet/x", /single-label/],
    ["a trailing-dot .local", "https://printer.local./x", /\.local names/],
    ["an empty fragment", "https://hooks.example.com/x#", /fragment/],
    ["localhost with trailing dots", "https://localhost../x", /single-label/],
    ["a .local name with trailing dots", "https://printer.local.../x", /\.local names/],
    ["documentation IPv6 (3fff::/20)", "https://[3fff:fff::1]/x", / is in 3fff::\/20:/],
    // Named in the message: the most specific refused block.
    ["ORCHID", "https://[2001:10::1]/x", /\(\[2001:10::1\] is in 2001:10::\/28: private/],
    ["ORCHIDv2", "https://[2001:20::1]/x", / is in 2001:20::\/28:/],
    ["drone entity tags", "https://[2001:30::1]/x", /2001:30::\/28/],
    ["IPv6 benchmarking", "https://[2001:2::1]/x", / is in 2001:2::\/48:/],
    ["Teredo", "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/x", / is in 2001::\/32:/],
    ["IETF protocol assignments", "https://[2001:5::1]/x", / is in 2001::\/23:/],
    ["the end of 2001::/23", "https://[2001:1ff:ffff::1]/x", /2001::\/23/],
    ["PCP anycast's neighbour", "https://[2001:1::4]/x", /2001::\/23/],
    ["NAT64", "https://[64:ff9b::7f00:1]/x", / is in 64:ff9b::\/96:/],
    ["local-use NAT64", "https://[64:ff9b:1::1]/x", / is in 64:ff9b:1::\/48:/],
    ["discard-only", "https://[100::1]/x", / is in 100::\/64:/],
    ["dummy prefix", "https://[100:0:0:1::1]/x", / is in 100:0:0:1::\/64:/],
    ["SRv6", "https://[5f00::1]/x", / is in 5f00::\/16:/],
    ["IPv6 multicast", "https://[ff02::1]/x", / is in ff00::\/8:/],
    ["unspecified IPv6", "https://[::]/x", / is in ::\/128:/],
    ["IPv4-compatible (deprecated)", "https://[::7f00:1]/x", / is in ::\/3:/],
    ["unallocated 4000::/2", "https://[4000::1]/x", / is in 4000::\/2:/],
    ["unallocated e000::", "https://[e000::1]/x", / is in 8000::\/1:/],
    ["IPv4 IETF assignments", "https://192.0.0.8/x", / is in 192\.0\.0\.0\/24:/],
    ["IPv4 benchmarking", "https://198.19.255.255/x", / is in 198\.18\.0\.0\/15:/],
    ["TEST-NET-2", "https://198.51.100.7/x", / is in 198\.51\.100\.0\/24:/],
    ["TEST-NET-3", "https://203.0.113.7/x", / is in 203\.0\.113\.0\/24:/],
    ["6to4 relay anycast", "https://192.88.99.1/x", / is in 192\.88\.99\.0\/24:/],
    ["reserved", "https://250.1.2.3/x", / is in 240\.0\.0\.0\/4:/],
    ["limited broadcast", "https://255.255.255.255/x", /240\.0\.0\.0\/4/],
    ["this network", "https://0.1.2.3/x", / is in 0\.0\.0\.0\/8:/],
    ["a .alt name", "https://x.alt/x", /\.alt names/],
    ["reverse DNS", "https://1.0.0.127.in-addr.arpa/x", /\.arpa names/],
    ["an ip6.arpa name", "https://1.0.ip6.arpa/x", /\.arpa names/],
    ["a .test name", "https://hooks.test/x", /\.test names/],
    ["a .invalid name", "https://hooks.invalid/x", /\.invalid names/],
    ["a .example name", "https://hooks.example/x", /\.example names/],
    ["an .onion name", "https://abc.onion/x", /\.onion names/],
    ["a .lan name", "https://nas.lan/x", /\.lan names/],
    ["invalid Punycode", "https://xn--a.com/x", /not valid Punycode/],
    ["Punycode of plain ASCII", "https://xn--abc-.com/x", /not valid Punycode/],
    ["a Punycode label that is not the last", "https://xn--a.example.com/x", /not valid Punycode/],
    // The parser drops these before checking, so the URL stored would differ from the one checked
    // and shown a line break or padding in every list that prints it.
    ["leading spaces", "  https://hooks.example.com/x", /spaces or control characters/],
    ["a trailing line break", "https://hooks.example.com/x\n", /spaces or control characters/],
    ["a tab inside the host", "https://hooks.exam\tple.com/x", /spaces or control characters/],
    ["a space in the path", "https://hooks.example.com/a b", /spaces or control characters/],
    ["an escape sequence", "https://hooks.example.com/\u001b[2J", /spaces or control characters/],
    ["DEL", "https://hooks.example.com/\u007f", /spaces or control characters/],
    // The parser sends a lone surrogate as U+FFFD (%EF%BF%BD): not the URL stored and shown.
    ["a lone surrogate in the path", "https://hooks.example.com/a\ud800", /lone surrogates/],
    ["a lone surrogate in the query", "https://hooks.example.com/?q=\udfff", /lone surrogates/],
    ["a lone surrogate in the host", "https://hooks\ud800.com/x", /lone surrogates/],
  ])("refuses %s, saying why", (_label, url, rule) => {
    expect(webhookUrlProblem(url, { localReceivers: false })).toMatch(rule);
  });

  it("http to localhost, 127.0.0.1 or [::1] only where local receivers are allowed", () => {
    for (const url of ["http://localhost:8788/", "http://127.0.0.1:9/x", "http://[::1]:80/"]) {
      expect(webhookUrlProblem(url, { localReceivers: true })).toBeNull();
      expect(webhookUrlProblem(url, { localReceivers: false })).toMatch(/https/);
    }
    expect(webhookUrlProblem("http://hooks.example.com/", { localReceivers: true })).toMatch(
      /http: only for localhost/,
    );
    expect(webhookUrlProblem("http://10.0.0.1/", { localReceivers: true })).toMatch(
      /http: only for localhost/,
    );
    expect(webhookUrlProblem("http://u:p@localhost/", { localReceivers: true })).toMatch(
      /credentials/,
    );
    expect(webhookUrlProblem("http://localhost:0/", { localReceivers: true })).toMatch(/port 0/);
  });
});
