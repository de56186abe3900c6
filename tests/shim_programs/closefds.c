/* Traced-shim test: close every descriptor from 3 to 1024 (the shim's log and
 * status descriptors included), then read argv[1] and write argv[2]. The
 * shim must re-open its log, and nothing of the trace may land in the
 * program's own files. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    static const char text[] = "written by closefds\n";
    char buf[4096];
    int fd;

    if (argc < 3) {
        fprintf(stderr, "usage: %s INPUT OUTPUT\n", argv[0]);
        return 2;
    }
    for (fd = 3; fd <= 1024; fd++)
        close(fd);
    fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
    fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return 1;
    close(fd);
    return 0;
}
