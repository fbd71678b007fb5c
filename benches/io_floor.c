/* The I/O floor of `etwdump scan` on a warm dump (docs/performance.md "Where each goal
 * stands"): read the whole file once in 128 KiB positioned reads, as `cat` does, then PAGES
 * pages of 4 KiB again at pseudo-random page offsets (xorshift64, fixed seed), as the carve
 * reads each buffer's pages through the page tables. Prints both times.
 *
 *   cc -O2 -o /tmp/io_floor benches/io_floor.c
 *   /tmp/io_floor DUMP 262144            # one thread
 *   /tmp/io_floor DUMP 262144 & /tmp/io_floor DUMP 262144; wait   # twice the work on two
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: io_floor FILE PAGES\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    long pages = atol(argv[2]), file_pages = size / 4096;
    if (file_pages == 0) {
        fprintf(stderr, "%s: smaller than a page\n", argv[1]);
        return 1;
    }
    char *buf = malloc(1 << 17);
    double t0 = now();
    off_t at = 0;
    ssize_t r;
    while ((r = pread(fd, buf, 1 << 17, at)) > 0)
        at += r;
    double t1 = now();
    uint64_t x = 88172645463325252ULL;
    for (long i = 0; i < pages; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (pread(fd, buf, 4096, (off_t)(x % file_pages) * 4096) != 4096) {
            perror("pread");
            return 1;
        }
    }
    double t2 = now();
    printf("whole file in 128 KiB reads: %.3f s; %ld pages in 4 KiB reads: %.3f s; total %.3f s\n",
           t1 - t0, pages, t2 - t1, t2 - t0);
    return 0;
}
