/* Traced-shim test: open argv[1] as a directory, openat(dirfd, argv[2]) and
 * copy what it reads to stdout. Exercises dirfd-relative path resolution. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char buf[4096];
    ssize_t n;
    int dirfd, fd;

    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR RELATIVE-FILE\n", argv[0]);
        return 2;
    }
    dirfd = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (dirfd < 0) {
        perror(argv[1]);
        return 1;
    }
    fd = openat(dirfd, argv[2], O_RDONLY);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (write(STDOUT_FILENO, buf, (size_t)n) != n)
            return 1;
    close(fd);
    close(dirfd);
    return n < 0 ? 1 : 0;
}
