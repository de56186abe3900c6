/* Traced-shim test: the leaf of a 3-level process tree. Reads the file named
 * in argv[1] and exits with the code given in argv[2] (default 0). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    char buf[4096];
    FILE *f;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [EXIT-CODE]\n", argv[0]);
        return 2;
    }
    f = fopen(argv[1], "r");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    while (fread(buf, 1, sizeof buf, f) > 0)
        ;
    fclose(f);
    return argc > 2 ? atoi(argv[2]) : 0;
}
