#!/usr/bin/env bash
# Capture the exact netlink request bytes iproute2 sends for a fixed set of
# commands, inside a throwaway network namespace, and write golden fixtures.
#
# Usage (as root):  crates/netlink/tests/golden/capture.sh [OUTDIR]
# Requires: ip (iproute2), strace, jq, python3.
#
# Raw bytes come from strace's "-e write=all -e read=all" full hex dumps of the
# data passed to sendmsg/sendto and returned by recvmsg (the decoded struct
# view is ignored).  Only the message(s) whose nlmsg_type is the one expected
# for the case are kept; RTM_GETLINK / netns helper requests are dropped.
#
# Output per case: <case>.txt
#   # cmd: ip <args>
#   # ifindex: va=<n> vb=<n>
#   # type: <nlmsg_type dec> flags: 0x<nlmsg_flags hex>
#   <hex of the full request message, nlmsghdr included, seq/pid as sent>
#   # note: ...            (optional)
#   # result: ok|error <errno> <NAME> (<strerror>); ip exit=<rc>
#   # reply: <hex>         (dump/get cases: first kernel reply with our seq)
# The four first lines are always in that order; extra lines all start with '#'.
# NB: nlmsg_seq is chosen by ip from time(NULL), so it differs between runs.
set -euo pipefail

OUT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
IP=${IP:-/usr/sbin/ip}
STRACE=${STRACE:-strace}
NS="gold$$r$RANDOM"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nlgolden.XXXXXX")

cleanup() {
    "$IP" netns del "$NS" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }
mkdir -p "$OUT"

ipn() { "$IP" -n "$NS" "$@"; }

# --- namespace setup -------------------------------------------------------
"$IP" netns add "$NS"
ipn link set lo up
ipn link add va type veth peer name va2
ipn link add vb type veth peer name vb2
for d in va va2 vb vb2; do ipn link set "$d" up; done
ipn addr add 10.1.0.1/24 dev va
ipn addr add 10.2.0.1/24 dev vb
ipn -6 addr add 2001:db8:1::1/64 dev va nodad
ipn -6 addr add 2001:db8:2::1/64 dev vb nodad

ifx() { ipn -j link show | jq -r --arg n "$1" '.[] | select(.ifname==$n) | .ifindex'; }
VA=$(ifx va); VA2=$(ifx va2); VB=$(ifx vb); VB2=$(ifx vb2)
echo "namespace $NS: lo=$(ifx lo) va=$VA va2=$VA2 vb=$VB vb2=$VB2"

# --- strace output parser --------------------------------------------------
cat > "$TMP/parse.py" <<'PY'
import errno, os, re, struct, sys

path, want = sys.argv[1], int(sys.argv[2])
call_re = re.compile(r'^(?:\d+\s+)?(sendmsg|sendto|recvmsg|recvfrom)\((\d+),.*\)\s+=\s+(-?\d+)')
calls = []          # [name, fd, ret, bytearray]
cur = None
for line in open(path, errors="replace"):
    line = line.rstrip("\n")
    m = call_re.match(line)
    if m:
        cur = [m.group(1), int(m.group(2)), int(m.group(3)), bytearray()]
        calls.append(cur)
        continue
    if line.startswith(" | ") and cur is not None:
        # " | OOOOO  hh hh hh hh hh hh hh hh  hh hh ... hh  ascii |"
        cur[3] += bytes(int(t, 16) for t in line[10:58].split())
        continue
    if not line.startswith(" * "):
        cur = None   # some other line (exit, signal, resumed...)

def msgs(buf):
    off = 0
    while off + 16 <= len(buf):
        ln, ty, fl, seq, pid = struct.unpack_from("<IHHII", buf, off)
        if ln < 16 or off + ln > len(buf):
            break
        yield bytes(buf[off:off + ln]), ty, fl, seq
        off += (ln + 3) & ~3

sent = []
for c in calls:
    if c[0] in ("sendmsg", "sendto") and c[2] > 0:
        if len(c[3]) < c[2]:
            sys.exit(f"short dump for {c[0]}: {len(c[3])} < {c[2]}")
        for m, ty, fl, seq in msgs(c[3][:c[2]]):
            if ty == want:
                sent.append((c[1], m, fl, seq))
if not sent:
    sys.exit(f"no message with nlmsg_type {want} found in {path}")
if len(sent) > 1:
    print(f"warning: {len(sent)} messages of type {want}; keeping the first", file=sys.stderr)
fd, req, flags, seq = sent[0]

replies = []
for c in calls:
    if c[0] in ("recvmsg", "recvfrom") and c[1] == fd and c[2] > 0 and c[3]:
        for m, ty, fl, s in msgs(c[3][:c[2]]):
            if s == seq:
                replies.append((m, ty))

result = "unknown (no reply with our seq captured)"
for m, ty in replies:
    if ty == 2:  # NLMSG_ERROR
        err = struct.unpack_from("<i", m, 16)[0]
        if err == 0:
            result = "ok (ack)"
        else:
            e = -err
            result = f"error {err} {errno.errorcode.get(e, '?')} ({os.strerror(e)})"
        break
    if ty == 3:  # NLMSG_DONE
        result = "ok (dump done)"
        break
    result = "ok (reply type %d)" % ty
print(want, "0x%04x" % flags)
print(req.hex())
print(result)
print(replies[0][0].hex() if replies else "")
PY

# --- case runner -------------------------------------------------------------
NOTE=""
run_case() {  # run_case <case> <nlmsg_type> <reply:0|1> <ip args...>
    local name=$1 type=$2 want_reply=$3; shift 3
    local st="$TMP/$name.strace" rc=0
    "$STRACE" -f -e trace=sendmsg,sendto,recvmsg -e write=all -e read=all \
        -xx -s 65535 -o "$st" "$IP" -n "$NS" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
    local parsed
    parsed=$(python3 "$TMP/parse.py" "$st" "$type") || { echo "FAILED to parse $name" >&2; return 1; }
    local tl hex res reply
    { read -r tl; read -r hex; read -r res; read -r reply || true; } <<<"$parsed"
    {
        echo "# cmd: ip $*"
        echo "# ifindex: va=$VA vb=$VB"
        echo "# type: ${tl%% *} flags: ${tl#* }"
        echo "$hex"
        [ -n "$NOTE" ] && echo "# note: $NOTE"
        echo "# result: $res; ip exit=$rc"
        if [ "$rc" != 0 ]; then sed 's/^/# stderr: /' "$TMP/$name.err"; fi
        if [ "$want_reply" = 1 ] && [ -n "$reply" ]; then echo "# reply: $reply"; fi
    } >"$OUT/$name.txt"
    NOTE=""
    printf '%-18s type=%-3s flags=%s exit=%s %s\n' "$name" "${tl%% *}" "${tl#* }" "$rc" "$res"
}

RTM_NEWROUTE=24 RTM_DELROUTE=25 RTM_GETROUTE=26
RTM_NEWNEXTHOP=104 RTM_DELNEXTHOP=105 RTM_GETNEXTHOP=106

run_case v4_single_add $RTM_NEWROUTE 0 route add 198.51.100.0/24 via 10.1.0.2 dev va proto 250
run_case v4_single_del $RTM_DELROUTE 0 route del 198.51.100.0/24 via 10.1.0.2 dev va proto 250
run_case v4_mp_add     $RTM_NEWROUTE 0 route add 198.51.100.0/24 table 100 metric 10 proto 250 nexthop via 10.1.0.2 dev va weight 2 nexthop via 10.2.0.2 dev vb
ipn -j -d route show table 100 >"$OUT/v4_mp_add.json"
run_case v4_mp_replace $RTM_NEWROUTE 0 route replace 198.51.100.0/24 table 100 metric 10 proto 250 nexthop via 10.1.0.2 dev va weight 3 nexthop via 10.2.0.2 dev vb weight 1
run_case v4_mp_change  $RTM_NEWROUTE 0 route change 198.51.100.0/24 table 100 metric 10 proto 250 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb
run_case v4_mp_append  $RTM_NEWROUTE 0 route append 198.51.100.0/24 table 100 metric 10 proto 250 nexthop via 10.1.0.3 dev va nexthop via 10.2.0.3 dev vb
run_case v4_mp_del     $RTM_DELROUTE 0 route del 198.51.100.0/24 table 100 metric 10
run_case v4_onlink_add $RTM_NEWROUTE 0 route add 203.0.113.0/24 proto 250 nexthop via 192.0.2.1 dev va onlink nexthop via 10.2.0.2 dev vb weight 256
run_case v4_table_big_add $RTM_NEWROUTE 0 route add 203.0.113.128/25 table 1000 proto 250 nexthop via 10.1.0.2 dev va nexthop via 10.2.0.2 dev vb
run_case v6_mp_add     $RTM_NEWROUTE 0 -6 route add 2001:db8:100::/48 metric 1024 proto 250 nexthop via 2001:db8:1::2 dev va weight 3 nexthop via 2001:db8:2::2 dev vb
ipn -j -6 route show >"$OUT/v6_mp_add.json"
run_case v6_mp_replace $RTM_NEWROUTE 0 -6 route replace 2001:db8:100::/48 metric 1024 proto 250 nexthop via 2001:db8:1::2 dev va nexthop via 2001:db8:2::2 dev vb weight 5
run_case v6_single_add $RTM_NEWROUTE 0 -6 route add 2001:db8:200::/64 via 2001:db8:1::2 dev va proto 250
run_case v6_mp_del     $RTM_DELROUTE 0 -6 route del 2001:db8:100::/48 metric 1024
run_case v4_dump       $RTM_GETROUTE 1 -4 route show table 100
run_case v6_dump       $RTM_GETROUTE 1 -6 route show table all
run_case nh_add        $RTM_NEWNEXTHOP 0 nexthop add id 10 via 10.1.0.2 dev va proto 250
run_case nh_add2       $RTM_NEWNEXTHOP 0 nexthop add id 11 via 10.2.0.2 dev vb proto 250
run_case nh_grp_add    $RTM_NEWNEXTHOP 0 nexthop add id 20 group 10,2/11 proto 250
run_case nh_route_add  $RTM_NEWROUTE 0 route add 192.0.2.128/25 nhid 20 proto 250
run_case nh_route_del  $RTM_DELROUTE 0 route del 192.0.2.128/25 nhid 20
run_case nh_grp_del    $RTM_DELNEXTHOP 0 nexthop del id 20
run_case nh_dump       $RTM_GETNEXTHOP 1 nexthop show
ipn route add 198.51.100.0/24 via 10.1.0.2 dev va proto 250
NOTE="prerequisite run first (not captured): ip route add 198.51.100.0/24 via 10.1.0.2 dev va proto 250"
run_case v4_get        $RTM_GETROUTE 1 route get 198.51.100.7 from 10.1.0.1 ipproto udp sport 1000 dport 2000
run_case v4_get_fibmatch $RTM_GETROUTE 1 route get 198.51.100.7 fibmatch

# ILA routes (LWT encap type 3): iproute2 sends them whether or not the kernel has the ILA
# module; without it the kernel refuses them (the result line says how).
run_case ila_route_add $RTM_NEWROUTE 0 -6 route add 2001:db8:1:2:2000::7/128 encap ila 2001:db8:ff:1 csum-mode adj-transport ident-type use-format hook-type output via 2001:db8:1::2 dev va proto 247
run_case ila_route_add_min $RTM_NEWROUTE 0 -6 route add 2001:db8:1:3::/64 encap ila 2001:db8:ff:2 dev vb

# --- sanity checks -----------------------------------------------------------
bad=0
for f in "$OUT"/*.txt; do
    hex=$(sed -n 4p "$f")
    want=$(sed -n 3p "$f" | awk '{print $3}')
    len=$(( 16#${hex:6:2}${hex:4:2}${hex:2:2}${hex:0:2} ))
    typ=$(( 16#${hex:10:2}${hex:8:2} ))
    if [ "$len" != $(( ${#hex} / 2 )) ] || [ "$typ" != "$want" ]; then
        echo "BAD: $f len=$len hexlen=$(( ${#hex} / 2 )) type=$typ want=$want" >&2; bad=1
    fi
done
[ "$bad" = 0 ] && echo "all fixtures consistent (nlmsg_len and nlmsg_type)"
exit "$bad"
