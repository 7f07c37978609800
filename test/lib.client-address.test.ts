import { describe, expect, it } from "vitest";
import { clientAddress } from "../src/lib/client-address";

describe("clientAddress", () => {
  it.each([
    // [CF-Connecting-IP, the client it counts as]
    [undefined, "127.0.0.1"],
    ["198.51.100.7", "198.51.100.7"],
    ["::ffff:198.51.100.7", "198.51.100.7"],
    ["::FFFF:198.51.100.7", "198.51.100.7"],
    ["0:0:0:0:0:ffff:198.51.100.7", "198.51.100.7"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["2001:db8:1:2::1", "2001:db8:1:2::/64"],
    ["2001:DB8:0001:0002:ffff::", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["::1", "0:0:0:0::/64"],
    ["2001:db8:1:2:3:4:5:6:7", "2001:db8:1:2:3:4:5:6:7"],
    ["2001:DB8:zz::1", "2001:db8:zz::1"],
    ["", ""],
  ])("%j counts as %j", (header, expected) => {
    expect(clientAddress(header)).toBe(expected);
  });

  it("two addresses of one /64 are one client; the next /64 is another", () => {
    expect(clientAddress("2001:db8:1:2::a")).toBe(clientAddress("2001:db8:1:2:ffff::b"));
    expect(clientAddress("2001:db8:1:3::a")).not.toBe(clientAddress("2001:db8:1:2::a"));
  });
});
