/* Traced-shim test: C library calls that read files with glibc's internal
 * opens (NSS, time zone, locale), which the shim's open never sees. */
#include <locale.h>
#include <pwd.h>
#include <stdio.h>
#include <time.h>

int main(void)
{
    struct passwd *pw = getpwuid(0);
    time_t t = 0;
    struct tm tm;
    char buf[64];
    setlocale(LC_ALL, "C.UTF-8");
    localtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Z", &tm);
    printf("%s %s\n", pw ? pw->pw_name : "?", buf);
    return 0;
}
