#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mproute developers
# SPDX-License-Identifier: GPL-2.0-only OR MIT (the repository's LICENSE)

"""ila_xlat: one ILA mapping (the receive side's ILA -> SIR translation), made so by ila."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ila_xlat
short_description: An ILA mapping (locator match to locator), kept by ila
version_added: "0.1.0"
description:
  - Makes one mapping of a network namespace's ILA tables what the task says (C(ila xlat
    replace)), or makes sure there is none for its key (C(ila xlat del)). The backend is the
    kernel's ILA module where the kernel has one, else ila's BPF translator (C(--backend)).
  - Written on ila's JSON. Every run first asks C(ila --check), so check mode and diff mode
    change nothing and report what a real run would do, with the mapping before and after.
options:
  loc_match:
    description: The locator a destination must have (four 16-bit groups, C(2001:db8:ff:1)).
    type: str
    required: true
  loc:
    description: What it becomes (the SIR prefix's upper 64 bits). Required with C(state=present).
    type: str
  dev:
    description: The receiving device (unset, any device).
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
  state:
    description: Whether the mapping must be there (as given) or not.
    type: str
    choices: [present, absent]
    default: present
  netns:
    description: Network namespace (a name under C(/run/netns)), as C(ila -n).
    type: str
  backend:
    description: Which tables (C(ila --backend)).
    type: str
    choices: [auto, kernel, bpf]
    default: auto
  ila:
    description: The ila program (a path, or a name looked up in C(PATH)).
    type: str
    default: ila
requirements:
  - ila on the managed host, run as root
attributes:
  check_mode:
    description: Runs C(ila --check), which changes nothing and says what would change.
    support: full
  diff_mode:
    description: The mapping before and after, as C(ila -j xlat show) prints it.
    support: full
  platform:
    description: Linux network namespaces.
    support: full
    platforms: linux
seealso:
  - module: mpt.net.ila_route
    description: The send side (SIR to ILA).
author:
  - mproute developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Packets to locator 2001:db8:ff:1 arriving on eth0 become SIR addresses
  mpt.net.ila_xlat:
    loc_match: "2001:db8:ff:1"
    loc: "2001:db8:1:2"
    dev: eth0
    csum_mode: neutral-map
"""

RETURN = r"""
before:
  description: The mapping before the task, as C(ila -j xlat show) prints it; null if none.
  returned: always
  type: dict
after:
  description: The mapping after the task (in check mode, as it would be); null if none.
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
            loc_match=dict(type="str", required=True),
            loc=dict(type="str"),
            dev=dict(type="str"),
            csum_mode=dict(type="str", default="no-action",
                           choices=["adj-transport", "neutral-map", "neutral-map-auto",
                                    "no-action"]),
            ident_type=dict(type="str", default="use-format", choices=["luid", "use-format"]),
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
    key = ["loc_match", p["loc_match"]] + (["dev", p["dev"]] if p["dev"] else [])
    if p["state"] == "present":
        args = ["xlat", "replace"] + key + ["loc", p["loc"], "csum-mode", p["csum_mode"],
                                            "ident-type", p["ident_type"]]
    else:
        # del of a mapping that is not there fails: absent is then a no-op
        want_dev = p["dev"] or "*"
        there = [m for m in ila.run(["xlat", "show"]) or []
                 if m.get("interface") == want_dev and m.get("locator_match") == p["loc_match"]]
        if not there:
            module.exit_json(changed=False, before=None, after=None, cmd=[],
                             diff=dict(before="", after=""))
        args = ["xlat", "del"] + key
    module.exit_json(**ila.apply(args))


if __name__ == "__main__":
    main()
