/* Traced-shim test: execle argv[1] with an EMPTY environment, passing
 * argv[2..] as its arguments (argv[0] of the new program is argv[1]).
 * The shim must re-inject itself so that the new image is still traced. */
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char *empty_env[] = {NULL};

    if (argc < 2) {
        fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    switch (argc) {
    case 2:
        execle(argv[1], argv[1], (char *)NULL, empty_env);
        break;
    case 3:
        execle(argv[1], argv[1], argv[2], (char *)NULL, empty_env);
        break;
    case 4:
        execle(argv[1], argv[1], argv[2], argv[3], (char *)NULL, empty_env);
        break;
    default:
        /* more arguments: the same thing through execve */
        execve(argv[1], argv + 1, empty_env);
        break;
    }
    perror(argv[1]);
    return 127;
}
