#!/usr/bin/python
# -*- coding: utf-8 -*-
# GPL-2.0-only OR MIT, as the rest of the repository.

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
    description: How flows or packets are spread over the nexthops.
    type: str
    choices: [l3-hash, l4-hash, per-packet, drr, random, wrandom]
    default: l3-hash
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
author:
  - mproute developers
"""

EXAMPLES = r"""
- name: Two paths for 198.51.100.0/24, flows spread by their 5-tuple
  mpt.net.mproute_route:
    dst: 198.51.100.0/24
    algo: l4-hash
    nexthops:
      - {via: 192.0.2.1, dev: eth0}
      - {via: 192.0.2.9, dev: eth1, weight: 2}

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
"""

import json

from ansible.module_utils.basic import AnsibleModule


def route_words(p):
    """The route in mproute's grammar, as replace takes it."""
    w = [p["dst"], "table", p["table"]]
    if p["metric"] is not None:
        w += ["metric", str(p["metric"])]
    if p["proto"]:
        w += ["proto", p["proto"]]
    w += ["algo", p["algo"]]
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


class Mproute:
    """mproute, run with -j (and -n NETNS) on this host."""

    def __init__(self, module):
        self.module = module
        p = module.params
        self.base = [module.get_bin_path(p["mproute"], required=True)]
        if p["netns"]:
            self.base += ["-n", p["netns"]]
        if p["nexthop_objects"]:
            self.base.append("--nexthop-objects")
        self.base.append("-j")

    def run(self, args, check=False):
        cmd = self.base + (["--check"] if check else []) + args
        rc, out, err = self.module.run_command(cmd)
        if rc != 0:
            # mproute's one line (and its hint) say what was wrong
            msg = (err.strip() or "mproute exited with status %d" % rc).splitlines()
            self.module.fail_json(msg=msg[0], hint="\n".join(msg[1:]), rc=rc, cmd=cmd,
                                  stdout=out, stderr=err)
        try:
            return json.loads(out) if out.strip() else None
        except ValueError as e:
            self.module.fail_json(msg="mproute printed no JSON: %s" % e, cmd=cmd, stdout=out)


def text(row):
    """A route for Ansible's diff."""
    return "" if row is None else json.dumps(row, indent=2, sort_keys=True) + "\n"


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
    mp = Mproute(module)
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
    plan = mp.run(args, check=True)
    before, after = plan["diff"]["before"], plan["diff"]["after"]
    result = dict(changed=plan["changed"], before=before, after=after, cmd=mp.base + args,
                  diff=dict(before=text(before), after=text(after)))
    if plan["changed"] and not module.check_mode:
        done = mp.run(args)
        result["changed"] = bool(done and done.get("changed", True))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
