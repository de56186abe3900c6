/* Traced-shim test, compiled with `gcc -static`: the shim cannot enter a
 * static binary, so its parent's `E` record has no matching `P`.
 * Reads argv[1] and exits 0. */
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char buf[4096];
    int fd;

    if (argc < 2)
        return 2;
    fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 1;
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
    return 0;
}
