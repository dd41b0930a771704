#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mproute developers
# SPDX-License-Identifier: GPL-2.0-only OR MIT (the repository's LICENSE)

"""mproute_route: one multipath route with its algorithm, made so by mproute."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mproute_route
short_description: A multipath route with a per-route algorithm, installed by mproute
version_added: "0.1.0"
description:
  - Makes one route of a network namespace what the task says, with C(mproute) (the route in
    the kernel's FIB, its algorithm in mproute's state and dataplane), or makes sure it is not
    there.
  - Written on mproute's JSON. C(state=present) is C(mproute replace), which changes nothing
    when the route is already as asked; C(state=absent) is C(mproute del) of a route that is
    there. Every run first asks C(mproute --check) what would change, so check mode and diff
    mode change nothing and report what a real run would do, with the route before and after.
  - Refusals are mproute's one-line errors (the kernel's own words where the kernel refused);
    mproute leaves the FIB and its state as they were before a refused command.
options:
  dst:
    description: The prefix (C(198.51.100.0/24), C(2001:db8::/32), C(default)).
    type: str
    required: true
  state:
    description: Whether the route must be there (as given) or not.
    type: str
    choices: [present, absent]
    default: present
  table:
    description: Routing table, by number or by name from C(/etc/iproute2/rt_tables).
    type: str
    default: main
  metric:
    description: The route's metric (preference). Unset, the kernel's default (0, or 1024 for IPv6).
    type: int
  proto:
    description: Protocol the route is installed with. Unset, C(mproute) (245).
    type: str
  algo:
    description:
      - How flows or packets are spread over the nexthops. C(l3-hash) hashes the addresses,
        C(l4-hash) the 5-tuple (a flow keeps its path); C(per-packet) and C(drr) take turns,
        C(random) and C(wrandom) draw (C(wrandom) by weight).
    type: str
    choices: [l3-hash, l4-hash, per-packet, drr, random, wrandom]
    default: l3-hash
  resilient:
    description:
      - With C(l3-hash) or C(l4-hash), a table of buckets between the hash and the nexthops
        (C(mproute ... algo ALGO resilient)), as the kernel's resilient nexthop groups keep it.
        Replacing the route with a nexthop less moves only that nexthop's buckets; with one more,
        only buckets idle for O(idle_timer) seconds, so that flows in progress keep their path.
      - Unset or false, the route has no such table (a route that had one loses it).
    type: bool
    default: false
    version_added: "0.2.0"
  buckets:
    description: The resilient table's size (1 to 4096). Unset, mproute's default (128).
    type: int
    version_added: "0.2.0"
  idle_timer:
    description:
      - Seconds a bucket must have been idle before it moves to a new nexthop (C(0), at once).
        Unset, mproute's default (120).
    type: int
    version_added: "0.2.0"
  consistent:
    description:
      - With C(l3-hash) or C(l4-hash), a consistent (Maglev) table computed from the route alone
        (C(mproute ... algo ALGO consistent)), from its nexthops, their weights and the seed, not the
        order they are listed in nor the route's history, so that routers given the same route
        send every flow to the same gateway. Removing a nexthop moves its flows and about 1 %
        of the others'.
      - Exclusive with O(resilient). The seed is 0 unless O(seed) is given.
    type: bool
    default: false
    version_added: "0.2.0"
  table_size:
    description: The consistent table's size, a prime up to 4093. Unset, mproute's default (4093).
    type: int
    version_added: "0.2.0"
  hash_fields:
    description:
      - What the hash reads (C(mproute ... hash-fields)), with the names of the kernel's
        C(fib_multipath_hash_fields). C(src-ip) and C(dst-ip) go together, and so do C(src-port)
        and C(dst-port), so that both directions of a flow hash alike; ports and protocol need
        O(algo=l4-hash).
      - Unset, the algorithm's own (l3-hash the addresses, l4-hash all five).
    type: list
    elements: str
    choices: [src-ip, dst-ip, ip-proto, src-port, dst-port]
    version_added: "0.2.0"
  seed:
    description: The route's hash seed (0 to 4294967295). Unset, the namespace's (random).
    type: int
    version_added: "0.2.0"
  nexthops:
    description: The paths, in order. Required with C(state=present).
    type: list
    elements: dict
    suboptions:
      via:
        description: Gateway address.
        type: str
      dev:
        description: Outgoing device.
        type: str
      weight:
        description: Weight, 1 to 256.
        type: int
        default: 1
      onlink:
        description: Take the gateway as on the link without a connected route to it.
        type: bool
        default: false
  netns:
    description: Network namespace (a name under C(/run/netns)), as C(mproute -n).
    type: str
  nexthop_objects:
    description:
      - Install the route as a reference to kernel nexthop objects (C(mproute --nexthop-objects)).
      - The kernel deletes a nexthop object when its device goes administratively down.
    type: bool
    default: false
  mproute:
    description: The mproute program (a path, or a name looked up in C(PATH)).
    type: str
    default: mproute
requirements:
  - mproute on the managed host, run as root (CAP_NET_ADMIN)
attributes:
  check_mode:
    description: Runs C(mproute --check), which changes nothing and says what would change.
    support: full
  diff_mode:
    description: The route before and after, as C(mproute -j show) prints it.
    support: full
  platform:
    description: Linux network namespaces.
    support: full
    platforms: linux
seealso:
  - module: mpt.net.mproute_dataplane
    description: Attaches the dataplane that carries out the algorithms.
author:
  - mproute developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Two paths for 198.51.100.0/24, flows spread by their 5-tuple
  mpt.net.mproute_route:
    dst: 198.51.100.0/24
    algo: l4-hash
    nexthops:
      - {via: 192.0.2.1, dev: eth0}
      - {via: 192.0.2.9, dev: eth1, weight: 2}

- name: Flows keep their path when a nexthop comes or goes (a resilient table of 256 buckets)
  mpt.net.mproute_route:
    dst: 2001:db8:100::/64
    algo: l4-hash
    resilient: true
    buckets: 256
    idle_timer: 30
    nexthops:
      - {via: "2001:db8:1::2", dev: eth0}
      - {via: "2001:db8:2::2", dev: eth1}

- name: Every router of the fleet sends a flow to the same gateway (a consistent table, one seed)
  mpt.net.mproute_route:
    dst: 203.0.113.0/24
    algo: l4-hash
    consistent: true
    seed: 7
    hash_fields: [ip-proto, src-port, dst-port]
    nexthops:
      - {via: 192.0.2.1, dev: eth0}
      - {via: 192.0.2.9, dev: eth1}

- name: No mproute route for 203.0.113.0/24 in table 100 of namespace blue
  mpt.net.mproute_route:
    netns: blue
    dst: 203.0.113.0/24
    table: "100"
    state: absent
"""

RETURN = r"""
before:
  description: The route before the task as C(mproute -j show) prints it; null if there was none.
  returned: always
  type: dict
after:
  description: The route after the task (in check mode, as it would be); null if none.
  returned: always
  type: dict
cmd:
  description: The mproute command the task ran (or, in check mode, would run).
  returned: always
  type: list
  elements: str
moved:
  description:
    - The share of the flow space (0.0 to 1.0) whose nexthop the change moves, from the route's
      tables before and after (C(mproute --check)'s C(moved)).
  returned: when a hashed route mproute manages changes
  type: float
  version_added: "0.2.0"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mpt.net.plugins.module_utils.tool import Tool


def route_words(p):
    """The route in mproute's grammar, as replace takes it."""
    w = [p["dst"], "table", p["table"]]
    if p["metric"] is not None:
        w += ["metric", str(p["metric"])]
    if p["proto"]:
        w += ["proto", p["proto"]]
    w += ["algo", p["algo"]]
    if p["resilient"]:
        w.append("resilient")
        if p["buckets"] is not None:
            w += ["buckets", str(p["buckets"])]
        if p["idle_timer"] is not None:
            w += ["idle-timer", str(p["idle_timer"])]
    if p["consistent"]:
        w.append("consistent")
        if p["table_size"] is not None:
            w += ["table-size", str(p["table_size"])]
    if p["hash_fields"]:
        w += ["hash-fields", ",".join(p["hash_fields"])]
    if p["seed"] is not None:
        w += ["seed", str(p["seed"])]
    for i, nh in enumerate(p["nexthops"] or []):
        if not nh.get("via") and not nh.get("dev"):
            raise ValueError("nexthops[%d]: give via, dev or both" % i)
        w.append("nexthop")
        if nh.get("via"):
            w += ["via", str(nh["via"])]
        if nh.get("dev"):
            w += ["dev", str(nh["dev"])]
        w += ["weight", str(nh.get("weight") or 1)]
        if nh.get("onlink"):
            w.append("onlink")
    return w


def key_words(p):
    """What names the route for del and show."""
    w = [p["dst"], "table", p["table"]]
    if p["metric"] is not None:
        w += ["metric", str(p["metric"])]
    return w


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dst=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            table=dict(type="str", default="main"),
            metric=dict(type="int"),
            proto=dict(type="str"),
            algo=dict(type="str", default="l3-hash",
                      choices=["l3-hash", "l4-hash", "per-packet", "drr", "random", "wrandom"]),
            resilient=dict(type="bool", default=False),
            buckets=dict(type="int"),
            idle_timer=dict(type="int"),
            consistent=dict(type="bool", default=False),
            table_size=dict(type="int"),
            hash_fields=dict(type="list", elements="str",
                             choices=["src-ip", "dst-ip", "ip-proto", "src-port", "dst-port"]),
            seed=dict(type="int"),
            nexthops=dict(type="list", elements="dict", options=dict(
                via=dict(type="str"),
                dev=dict(type="str"),
                weight=dict(type="int", default=1),
                onlink=dict(type="bool", default=False),
            )),
            netns=dict(type="str"),
            nexthop_objects=dict(type="bool", default=False),
            mproute=dict(type="str", default="mproute"),
        ),
        required_if=[("state", "present", ["nexthops"])],
        supports_check_mode=True,
    )
    p = module.params
    if not p["resilient"] and (p["buckets"] is not None or p["idle_timer"] is not None):
        module.fail_json(msg="buckets and idle_timer are options of resilient: true")
    if not p["consistent"] and p["table_size"] is not None:
        module.fail_json(msg="table_size is an option of consistent: true")
    mp = Tool(module, p["mproute"], p["netns"],
              ["--nexthop-objects"] if p["nexthop_objects"] else [])
    if p["state"] == "present":
        try:
            args = ["replace"] + route_words(p)
        except ValueError as e:
            module.fail_json(msg=str(e))
    else:
        # del of a route that is not there fails, as with ip route: absent is then a no-op
        rows = [r for r in mp.run(["show", p["dst"], "table", p["table"]]) or []
                if p["metric"] is None or r.get("metric") == p["metric"]]
        if not rows:
            module.exit_json(changed=False, before=None, after=None, cmd=[],
                             diff=dict(before="", after=""))
        args = ["del"] + key_words(p)
    module.exit_json(**mp.apply(args))


if __name__ == "__main__":
    main()
