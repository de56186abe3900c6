/* Traced-shim test: must behave byte for byte the same with and without
 * the shim. Prints a fixed text, stats and opens existing and missing files
 * (reporting errno values), writes to stderr and exits with code 3.
 * argv[1] (optional) is an existing file to use, default /etc/hostname. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *existing = argc > 1 ? argv[1] : "/etc/hostname";
    const char *missing = "/nonexistent/memotest/definitely-missing";
    struct stat st;
    int r, fd, e;
    FILE *f;

    printf("memotest identical-output test\n");
    r = stat(existing, &st);
    printf("stat existing: %d\n", r);
    errno = 0;
    r = stat(missing, &st);
    e = errno;
    printf("stat missing: %d errno=%d (%s)\n", r, e, strerror(e));
    errno = 12345;
    fd = open(existing, O_RDONLY);
    printf("open existing: %s errno-unchanged=%d\n", fd >= 0 ? "ok" : "failed", errno == 12345);
    if (fd >= 0)
        close(fd);
    fd = open(missing, O_RDONLY);
    e = errno;
    printf("open missing: %d errno=%d\n", fd, e);
    errno = 0;
    r = access(missing, F_OK);
    printf("access missing: %d errno=%d\n", r, errno);
    f = fopen(missing, "r");
    printf("fopen missing: %s errno=%d\n", f ? "ok" : "NULL", errno);
    r = mkdir("/proc/memotest-cannot-create", 0755);
    printf("mkdir in /proc: %d errno=%d\n", r, errno);
    fflush(stdout);
    fprintf(stderr, "this goes to stderr\n");
    return 3;
}
