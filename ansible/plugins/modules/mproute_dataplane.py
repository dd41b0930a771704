#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mproute developers
# SPDX-License-Identifier: GPL-2.0-only OR MIT (the repository's LICENSE)

"""mproute_dataplane: mproute's dataplane attached to (or detached from) devices."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mproute_dataplane
short_description: mproute's dataplane (tc/XDP) attached to devices, in a mode
version_added: "0.2.0"
description:
  - Attaches mproute's dataplane, which carries out the routes' algorithms, to the devices
    O(devs) in the mode asked for (C(mproute dataplane attach)), or detaches it from them
    (C(mproute dataplane detach)). Without an attached dataplane the kernel forwards mproute's
    routes by its own multipath hash and the algorithms are not enforced.
  - Written on mproute's JSON. Every run first asks C(mproute --check) which hooks (C(tc),
    C(xdp), C(xdp-generic)) each device would have, and reads C(mproute -j dataplane show)
    for the attachments' delivery into veth peers (O(peer)), so check mode and diff mode change
    nothing and report what a real run would do.
  - O(mode=auto) picks per device as mproute does (tc on veths and virtual devices, native XDP
    elsewhere, with tc beside it); an XDP attachment always has the tc program beside it.
  - O(fastpath) is given to every attach the task makes and compared with what
    C(mproute -j dataplane show) reports for each attachment.
options:
  devs:
    description: The devices.
    type: list
    elements: str
    required: true
    aliases: [dev]
  state:
    description: Whether the dataplane must be on the devices (in O(mode)) or on none of them.
    type: str
    choices: [present, absent]
    default: present
  mode:
    description: The hook (C(mproute dataplane attach ... MODE)).
    type: str
    choices: [auto, xdp, xdp-generic, tc]
    default: auto
  fastpath:
    description: Forward destinations mproute does not manage by the kernel's FIB from the dataplane.
    type: bool
    default: true
  peer:
    description:
      - tc delivers packets for a veth whose peer is in another namespace straight into the
        peer (C(bpf_redirect_peer)), skipping that veth's transmit path (its qdisc, egress tc,
        captures). The devices concerned are the namespace's veths with a peer elsewhere and
        the C(noqueue) qdisc, as C(ip -d link show) says; one with an egress tc program is left
        out by mproute but not by this comparison.
    type: bool
    default: true
  prepare_peers:
    description: With native XDP, enable GRO on the veth peers it redirects into (each attach).
    type: bool
    default: false
  netns:
    description: Network namespace (a name under C(/run/netns)), as C(mproute -n).
    type: str
  mproute:
    description: The mproute program (a path, or a name looked up in C(PATH)).
    type: str
    default: mproute
requirements:
  - mproute on the managed host, run as root (CAP_NET_ADMIN, CAP_BPF), bpffs mounted
  - iproute2's ip (for O(peer))
attributes:
  check_mode:
    description: Runs C(mproute --check), which changes nothing and says what would change.
    support: full
  diff_mode:
    description: The devices' hooks (and the veth peers tc delivers into) before and after.
    support: full
  platform:
    description: Linux network namespaces.
    support: full
    platforms: linux
seealso:
  - module: mpt.net.mproute_route
    description: The routes whose algorithms the dataplane carries out.
author:
  - mproute developers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: The dataplane on the uplinks, in the mode mproute picks
  mpt.net.mproute_dataplane:
    devs: [eth0, eth1]

- name: tc on the veths of namespace blue, packets into the peers through their transmit path
  mpt.net.mproute_dataplane:
    netns: blue
    devs: [va, vb]
    mode: tc
    peer: false

- name: No dataplane on eth1
  mpt.net.mproute_dataplane:
    devs: [eth1]
    state: absent
"""

RETURN = r"""
before:
  description:
    - Each device's hooks before the task (C(devices), by device, as C(["tc"])), with C(peer_devs),
      the veths tc delivered into, by device.
  returned: always
  type: dict
after:
  description: The same after the task (in check mode, as it would be).
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
from ansible_collections.mpt.net.plugins.module_utils.tool import Tool, text


def onoff(b):
    return "on" if b else "off"


def peer_candidates(module, netns):
    """The veths tc may deliver straight into: a peer in another namespace, noqueue."""
    cmd = [module.get_bin_path("ip", required=True)]
    if netns:
        cmd += ["-n", netns]
    cmd += ["-j", "-d", "link", "show"]
    rc, out, err = module.run_command(cmd)
    if rc != 0:
        module.fail_json(msg=(err.strip() or "ip exited with status %d" % rc), cmd=cmd)
    try:
        links = json.loads(out)
    except ValueError as e:
        module.fail_json(msg="ip printed no JSON: %s" % e, cmd=cmd, stdout=out)
    return sorted(
        link["ifname"] for link in links
        if (link.get("linkinfo") or {}).get("info_kind") == "veth"
        and "link_netnsid" in link and link.get("qdisc", "noqueue") == "noqueue")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devs=dict(type="list", elements="str", required=True, aliases=["dev"]),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            mode=dict(type="str", choices=["auto", "xdp", "xdp-generic", "tc"], default="auto"),
            fastpath=dict(type="bool", default=True),
            peer=dict(type="bool", default=True),
            prepare_peers=dict(type="bool", default=False),
            netns=dict(type="str"),
            mproute=dict(type="str", default="mproute"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["devs"]:
        module.fail_json(msg="devs: give at least one device")
    mp = Tool(module, p["mproute"], p["netns"])
    devs = []
    for d in p["devs"]:
        devs += ["dev", d]
    if p["state"] == "absent":
        module.exit_json(**mp.apply(["dataplane", "detach"] + devs))

    args = ["dataplane", "attach"] + devs + [p["mode"], "fastpath", onoff(p["fastpath"]),
                                             "peer", onoff(p["peer"])]
    if p["prepare_peers"]:
        args.append("prepare-peers")
    # What --check compares is the hooks; how the tc programs already there deliver (peer) and
    # forward (fastpath, where reported) is compared here, from dataplane show.
    shown = mp.run(["dataplane", "show"]) or {}
    rows = [a for a in shown.get("attachments") or []
            if a.get("dev") in p["devs"] and a.get("mode") == "tc"]
    want_peers = peer_candidates(module, p["netns"]) if p["peer"] else []
    stale = [a["dev"] for a in rows
             if sorted(a.get("peer_devs") or []) != want_peers
             or ("fastpath" in a and bool(a["fastpath"]) != p["fastpath"])]
    result = mp.apply(args, extra_changed=bool(stale))
    for side in ("before", "after"):
        if isinstance(result[side], dict):
            result[side] = dict(result[side])
    result["before"]["peer_devs"] = dict((a["dev"], sorted(a.get("peer_devs") or []))
                                         for a in rows)
    result["after"]["peer_devs"] = dict((d, want_peers) for d in p["devs"]
                                        if "tc" in result["after"]["devices"].get(d, []))
    result["diff"] = dict(before=text(result["before"]), after=text(result["after"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
