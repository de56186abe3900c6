/* Traced-shim test: N threads (argv[1], default 8) open and read files
 * concurrently. argv[2] is a directory holding files f0 .. f{K-1}; K is
 * argv[3] (default 64). Thread t reads the files i with i % N == t, so every
 * file is read by exactly one thread and the trace must hold one R per file:
 * no record lost, none torn. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *g_dir;
static int g_threads = 8, g_files = 64;
static int g_failed;

static void *worker(void *arg)
{
    long t = (long)arg;
    char path[4096], buf[512];
    int i, fd;

    for (i = (int)t; i < g_files; i += g_threads) {
        snprintf(path, sizeof path, "%s/f%d", g_dir, i);
        fd = open(path, O_RDONLY);
        if (fd < 0) {
            __atomic_store_n(&g_failed, 1, __ATOMIC_RELAXED);
            continue;
        }
        while (read(fd, buf, sizeof buf) > 0)
            ;
        close(fd);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t *tids;
    long t;

    if (argc < 3) {
        fprintf(stderr, "usage: %s THREADS DIR [FILES]\n", argv[0]);
        return 2;
    }
    g_threads = atoi(argv[1]) > 0 ? atoi(argv[1]) : 8;
    g_dir = argv[2];
    if (argc > 3)
        g_files = atoi(argv[3]);
    tids = calloc((size_t)g_threads, sizeof *tids);
    if (tids == NULL)
        return 1;
    for (t = 0; t < g_threads; t++)
        if (pthread_create(&tids[t], NULL, worker, (void *)t) != 0)
            return 1;
    for (t = 0; t < g_threads; t++)
        pthread_join(tids[t], NULL);
    free(tids);
    return g_failed;
}
