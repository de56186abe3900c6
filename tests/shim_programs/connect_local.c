/* Traced-shim test: connect a TCP socket to 127.0.0.1:PORT (argv[1]).
 * Exits 0 whether or not the connection succeeds: the attempt is traced. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct sockaddr_in sa;
    int fd;

    if (argc < 2)
        return 2;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)atoi(argv[1]));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)connect(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
    return 0;
}
