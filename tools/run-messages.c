/* npullm-run's conversation input (see run-messages.h). */
#include "run-messages.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define MAX_MESSAGES_FILE (64u << 20)

char *run_messages_read(const char *arg)
{
    if (arg[0] != '@')
        return strdup(arg);
    FILE *f = fopen(arg + 1, "rb");
    if (!f) {
        fprintf(stderr, "npullm-run: cannot open %s: %s\n", arg + 1, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 65536 * 2;
            char *nb = cap > MAX_MESSAGES_FILE + 65536 * 2 ? NULL : realloc(buf, cap);
            if (!nb) {
                fprintf(stderr, "npullm-run: %s is too large (at most %u bytes)\n", arg + 1, MAX_MESSAGES_FILE);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, 65536, f);
        n += k;
        if (k == 0)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "npullm-run: cannot read %s\n", arg + 1);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (strlen(buf) != n) {
        fprintf(stderr, "npullm-run: %s contains a NUL byte\n", arg + 1);
        free(buf);
        return NULL;
    }
    return buf;
}
