# -*- coding: utf-8 -*-
# Copyright: mproute developers
# SPDX-License-Identifier: GPL-2.0-only OR MIT

"""What every module of mpt.net does with its tool: run it with -j (and -n NETNS) on the
managed host, fail the task with the tool's one line when it refuses, read its JSON, and show
an object (or its absence) in Ansible's diff."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


class Tool:
    """A tool of the set (mproute, ila), run with -j on this host."""

    def __init__(self, module, program, netns=None, options=None):
        self.module = module
        self.name = program
        self.base = [module.get_bin_path(program, required=True)]
        if netns:
            self.base += ["-n", netns]
        self.base += list(options or []) + ["-j"]

    def run(self, args, check=False):
        """The tool's JSON answer to ARGS (with --check: its dry run); None if it printed none."""
        cmd = self.base + (["--check"] if check else []) + list(args)
        rc, out, err = self.module.run_command(cmd)
        if rc != 0:
            # the tool's one line (and its hint) say what was wrong
            msg = (err.strip() or "%s exited with status %d" % (self.name, rc)).splitlines()
            self.module.fail_json(msg=msg[0], hint="\n".join(msg[1:]), rc=rc, cmd=cmd,
                                  stdout=out, stderr=err)
        try:
            return json.loads(out) if out.strip() else None
        except ValueError as e:
            self.module.fail_json(msg="%s printed no JSON: %s" % (self.name, e), cmd=cmd,
                                  stdout=out)

    def apply(self, args, extra_changed=False):
        """The usual task: the dry run first (check mode stops there), then, if something would
        change, the command for real. `extra_changed`: a change the dry run cannot see."""
        plan = self.run(args, check=True)
        before, after = plan["diff"]["before"], plan["diff"]["after"]
        changed = bool(plan["changed"]) or extra_changed
        result = dict(changed=changed, before=before, after=after, cmd=self.base + list(args),
                      diff=dict(before=text(before), after=text(after)))
        if plan.get("moved") is not None:
            result["moved"] = plan["moved"]
        if changed and not self.module.check_mode:
            done = self.run(args)
            result["changed"] = extra_changed or bool(done and done.get("changed", True))
        return result


def text(obj):
    """An object for Ansible's diff: its JSON, or nothing for null (absent)."""
    return "" if obj is None else json.dumps(obj, indent=2, sort_keys=True) + "\n"
