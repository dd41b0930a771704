/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mpt/lib/defs.h - the UAPI numbers every program needs that vmlinux.h does
 * not carry (it has the kernel's enums and structs, not its #defines), and the
 * access macros the programs share.
 */
#ifndef MPT_LIB_DEFS_H
#define MPT_LIB_DEFS_H

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define ETH_ALEN 6
#define ETH_HLEN 14
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ICMPV6 58
#define IPPROTO_SCTP 132
#define IP_MF 0x2000
#define IP_OFFSET 0x1FFF
#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define TC_ACT_REDIRECT 7

/* One read or write of a value the compiler must neither merge nor tear. */
#define MPT_READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define MPT_WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

#endif /* MPT_LIB_DEFS_H */
