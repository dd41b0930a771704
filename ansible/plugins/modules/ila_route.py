#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mproute developers
# SPDX-License-Identifier: GPL-2.0-only OR MIT (the repository's LICENSE)

"""ila_route: one ILA route (the send side's SIR -> ILA translation), made so by ila."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ila_route
short_description: An ILA route (SIR prefix to locator), kept by ila
version_added: "0.2.0"
description:
  - Makes one ILA route of a network namespace what the task says (C(ila route replace)), a
    route to a SIR prefix whose packets get the locator O(loc) on the way out (O(hook_type=output))
    or when forwarded (O(hook_type=input)), or makes sure there is none for its prefix and table
    (C(ila route del)). The backend is the kernel's ILA module (LWT encap) where the kernel has
    one, else ila's BPF translator (C(--backend)).
  - Written on ila's JSON. Every run first asks C(ila --check), so check mode and diff mode
    change nothing and report what a real run would do, with the route before and after.
  - With the BPF backend, nothing is translated until ila's dataplane is attached to the route's
    device (C(ila dataplane attach)); ila says so in a note.
options:
  prefix:
    description:
      - The SIR prefix (an IPv6 prefix; an address alone is a /128). With O(ident_type=use-format)
        it must be at least a /67 (the locator and the identifier's type).
    type: str
    required: true
  loc:
    description: The locator its addresses get (four 16-bit groups, C(2001:db8:ff:1)). Required with O(state=present).
    type: str
  csum_mode:
    description: How the checksum is kept right.
    type: str
    choices: [adj-transport, neutral-map, neutral-map-auto, no-action]
    default: no-action
  ident_type:
    description: The identifier's type.
    type: str
    choices: [luid, use-format]
    default: use-format
  hook_type:
    description: Translate what the route sends (C(output)) or what is forwarded by it (C(input)).
    type: str
    choices: [output, input]
    default: output
  via:
    description: Gateway address.
    type: str
  dev:
    description: Outgoing device.
    type: str
  table:
    description: Routing table, by number or by name.
    type: str
    default: main
  state:
    description: Whether the route must be there (as given) or not.
    type: str
    choices: [present, absent]
    default: present
  netns:
    description: Network namespace (a name under C(/run/netns)), as C(ila -n).
    type: str
  backend:
    description: Which implementation (C(ila --backend)).
    type: str
    choices: [auto, kernel, bpf]
    default: auto
  ila:
    description: The ila program (a path, or a name looked up in C(PATH)).
    type: str
    default: ila
requirements:
  - ila on the managed host, run as root (CAP_NET_ADMIN)
attributes:
  check_mode:
    description: Runs C(ila --check), which changes nothing and says what would change.
    support: full
  diff_mode:
    description: The route before and after, as C(ila -j route show) prints it.
    support: full
  platform:
    description: Linux network namespaces.
    support: full
    platforms: linux
seealso:
  - module: mpt.net.ila_xlat
    description: The receive side (ILA to SIR).
author:
  - mproute developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Packets to 2001:db8:100::/64 leave with locator 2001:db8:ff:1
  mpt.net.ila_route:
    prefix: 2001:db8:100::/64
    loc: "2001:db8:ff:1"
    ident_type: luid
    csum_mode: neutral-map
    via: 2001:db8:1::2
    dev: eth0

- name: No ILA route to 2001:db8:200::/64 in namespace blue
  mpt.net.ila_route:
    netns: blue
    prefix: 2001:db8:200::/64
    state: absent
"""

RETURN = r"""
before:
  description: The route before the task, as C(ila -j route show) prints it; null if none.
  returned: always
  type: dict
after:
  description: The route after the task (in check mode, as it would be); null if none.
  returned: always
  type: dict
cmd:
  description: The ila command the task ran (or, in check mode, would run).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mpt.net.plugins.module_utils.tool import Tool


def main():
    module = AnsibleModule(
        argument_spec=dict(
            prefix=dict(type="str", required=True),
            loc=dict(type="str"),
            csum_mode=dict(type="str", default="no-action",
                           choices=["adj-transport", "neutral-map", "neutral-map-auto",
                                    "no-action"]),
            ident_type=dict(type="str", default="use-format", choices=["luid", "use-format"]),
            hook_type=dict(type="str", default="output", choices=["output", "input"]),
            via=dict(type="str"),
            dev=dict(type="str"),
            table=dict(type="str", default="main"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            netns=dict(type="str"),
            backend=dict(type="str", choices=["auto", "kernel", "bpf"], default="auto"),
            ila=dict(type="str", default="ila"),
        ),
        required_if=[("state", "present", ["loc"])],
        supports_check_mode=True,
    )
    p = module.params
    ila = Tool(module, p["ila"], p["netns"], ["--backend", p["backend"]])
    if p["state"] == "present":
        args = ["route", "replace", p["prefix"], "loc", p["loc"], "csum-mode", p["csum_mode"],
                "ident-type", p["ident_type"], "hook-type", p["hook_type"]]
        if p["via"]:
            args += ["via", p["via"]]
        if p["dev"]:
            args += ["dev", p["dev"]]
        args += ["table", p["table"]]
    else:
        # del of a route that is not there fails, as with ip route: absent is then a no-op
        if not ila.run(["route", "show", p["prefix"], "table", p["table"]]):
            module.exit_json(changed=False, before=None, after=None, cmd=[],
                             diff=dict(before="", after=""))
        args = ["route", "del", p["prefix"], "table", p["table"]]
    module.exit_json(**ila.apply(args))


if __name__ == "__main__":
    main()
