// Which URLs a webhook endpoint may have: https on a public host, no credentials; http to
// localhost only where local receivers are allowed.
import { describe, expect, it } from "vitest";
import { webhookUrlProblem } from "../src/lib/webhook-url";

describe("webhook endpoint URLs", () => {
  it.each([
    "https://hooks.example.com/animal-store",
    "https://hooks.example.com:8443/a?b=c",
    "https://93.184.216.34/hook",
    "https://[2606:4700::1111]/hook",
    "https://xn--bcher-kva.example.org/",
  ])("accepts %s", (url) => {
    expect(webhookUrlProblem(url, false)).toBeNull();
  });

  it.each([
    ["not a URL", "hooks.example.com/x", /absolute URL/],
    ["http", "http://hooks.example.com/x", /^must use https:$/],
    ["ftp", "ftp://hooks.example.com/x", /https/],
    ["credentials", "https://user:pw@hooks.example.com/x", /credentials/],
    ["a user alone", "https://user@hooks.example.com/x", /credentials/],
    ["a fragment", "https://hooks.example.com/x#y", /fragment/],
    ["too long", `https://hooks.example.com/${"a".repeat(2048)}`, /at most 2048/],
    ["loopback", "https://127.0.0.1/x", /127\.0\.0\.1 is a private/],
    ["loopback in hex", "https://0x7f.1/x", /127\.0\.0\.1/],
    ["loopback as a number", "https://2130706433/x", /127\.0\.0\.1/],
    ["10/8", "https://10.1.2.3/x", /private/],
    ["172.16/12", "https://172.31.255.255/x", /private/],
    ["192.168/16", "https://192.168.1.1/x", /private/],
    ["link-local (metadata)", "https://169.254.169.254/latest", /private/],
    ["CGNAT", "https://100.64.0.1/x", /private/],
    ["unspecified", "https://0.0.0.0/x", /private/],
    ["multicast", "https://224.0.0.1/x", /private/],
    ["IPv6 loopback", "https://[::1]/x", /\[::1\]/],
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
    ["documentation IPv6 (3fff::/20)", "https://[3fff:fff::1]/x", /private/],
    // The parser drops these before checking, so the URL stored would differ from the one checked
    // and shown a line break or padding in every list that prints it.
    ["leading spaces", "  https://hooks.example.com/x", /spaces or control characters/],
    ["a trailing line break", "https://hooks.example.com/x\n", /spaces or control characters/],
    ["a tab inside the host", "https://hooks.exam\tple.com/x", /spaces or control characters/],
    ["a space in the path", "https://hooks.example.com/a b", /spaces or control characters/],
    ["an escape sequence", "https://hooks.example.com/\u001b[2J", /spaces or control characters/],
    ["DEL", "https://hooks.example.com/\u007f", /spaces or control characters/],
  ])("refuses %s, saying why", (_label, url, rule) => {
    expect(webhookUrlProblem(url, false)).toMatch(rule);
  });

  it("http to localhost, 127.0.0.1 or [::1] only where local receivers are allowed", () => {
    for (const url of ["http://localhost:8788/", "http://127.0.0.1:9/x", "http://[::1]:80/"]) {
      expect(webhookUrlProblem(url, true)).toBeNull();
      expect(webhookUrlProblem(url, false)).toMatch(/https/);
    }
    expect(webhookUrlProblem("http://hooks.example.com/", true)).toMatch(
      /http: only for localhost/,
    );
    expect(webhookUrlProblem("http://10.0.0.1/", true)).toMatch(/http: only for localhost/);
    expect(webhookUrlProblem("http://u:p@localhost/", true)).toMatch(/credentials/);
  });
});
