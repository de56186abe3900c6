/* SHA-256 (FIPS 180-4): what memotest-sh's front checks a file held by its content with
 * (Python's hashlib.sha256 writes the stamp's; a test holds them equal). */
#ifndef MEMOTEST_SHA256_H
#define MEMOTEST_SHA256_H
#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    unsigned char block[64];
    size_t fill;
    uint64_t bytes;
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const unsigned char *p, size_t n);
/* Ends the hash: 64 hex digits and a NUL in out. */
void sha256_hex(struct sha256 *c, char out[65]);
#endif
