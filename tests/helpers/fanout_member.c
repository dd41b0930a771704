/*
 * fanout_member: an independent program for pfanout's tests (not our code): it opens COUNT
 * AF_PACKET sockets (ETH_P_ALL) bound to DEV, each joins fanout group ID with MODE and FLAGS
 * (the 16-bit type_flags, legacy int form), optionally with a TPACKET_V3 ring of 8 blocks of
 * 64 KiB (frames of 2 KiB), then prints "ready INO INO ..." and waits until standard input
 * closes. An ID of "-" joins no group.
 *
 *   fanout_member DEV ID TYPE_FLAGS COUNT [ring]
 */
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: fanout_member DEV ID TYPE_FLAGS COUNT [ring]\n");
		return 2;
	}
	unsigned ifindex = if_nametoindex(argv[1]);
	int id = atoi(argv[2]), tf = (int)strtol(argv[3], NULL, 0), n = atoi(argv[4]);
	int ring = argc > 5 && strcmp(argv[5], "ring") == 0;
	if (!ifindex) {
		perror("if_nametoindex");
		return 2;
	}
	printf("ready");
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
		if (fd < 0) {
			perror("socket");
			return 2;
		}
		struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
					   .sll_ifindex = (int)ifindex };
		if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
			perror("bind");
			return 2;
		}
		if (ring) {
			int v = TPACKET_V3;
			struct tpacket_req3 req = { .tp_block_size = 1 << 16, .tp_block_nr = 8,
						    .tp_frame_size = 2048,
						    .tp_frame_nr = (1 << 16) / 2048 * 8,
						    .tp_retire_blk_tov = 10 };
			if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)) < 0 ||
			    setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0) {
				perror("ring");
				return 2;
			}
		}
		int val = id | (tf << 16);
		if (argv[2][0] != '-' &&
		    setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &val, sizeof(val)) < 0) {
			perror("PACKET_FANOUT");
			return 2;
		}
		struct stat st;
		if (fstat(fd, &st) < 0) {
			perror("fstat");
			return 2;
		}
		printf(" %lu", (unsigned long)st.st_ino);
	}
	printf("\n");
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
