/**
 * The client a request counts against, from its `CF-Connecting-IP` (loopback when absent, as in
 * local development). IPv4 as given; an IPv4 client written as IPv6 as its IPv4; other IPv6
 * clients by their /64, since one host can use any address in it. Anything unparsable is
 * returned lowercased, so it still counts as one client.
 */
export function clientAddress(connectingIp: string | undefined): string {
  const ip = connectingIp ?? "127.0.0.1";
  if (!ip.includes(":")) return ip;
  const mapped = ip.match(/^(?:::ffff:|(?:0{1,4}:){5}ffff:)(\d{1,3}(?:\.\d{1,3}){3})$/i);
  if (mapped) return mapped[1]!;
  const [head = "", tail = ""] = ip.split("::");
  const parts = (s: string) => s.split(":").filter(Boolean);
  const zeros = Math.max(0, 8 - parts(head).length - parts(tail).length);
  const groups = ip.includes("::")
    ? [...parts(head), ...Array<string>(zeros).fill("0"), ...parts(tail)]
    : parts(ip);
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/i.test(g)))
    return ip.toLowerCase();
  const prefix = groups.slice(0, 4).map((g) => g.toLowerCase().replace(/^0+(?=.)/, ""));
  return `${prefix.join(":")}::/64`;
}
