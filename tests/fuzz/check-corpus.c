/* Keeps the seed corpus meaningful: every valid-* file must open with
 * npl_gguf_open and every invalid-* file must be rejected with a located
 * format/unsupported error, so a seed cannot silently stop reaching the
 * code it was written for. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "gguf.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    int passed = 0, failed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        bool valid = strncmp(e->d_name, "valid-", 6) == 0;
        bool invalid = strncmp(e->d_name, "invalid-", 8) == 0;
        if (!valid && !invalid)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        npl_error err = { 0 };
        npl_gguf *g = npl_gguf_open(path, &err);
        bool ok;
        if (valid) {
            ok = g != NULL;
            printf("%s %s: %zu keys, %zu tensors%s%s\n", ok ? "ok  " : "FAIL", e->d_name, npl_gguf_n_kv(g),
                   npl_gguf_n_tensors(g), ok ? "" : ": ", ok ? "" : err.message);
        } else {
            ok = !g && (err.code == NPL_ERR_FORMAT || err.code == NPL_ERR_UNSUPPORTED) &&
                 strncmp(err.message, path, strlen(path)) == 0 && strstr(err.message, ": offset ");
            printf("%s %s: %s\n", ok ? "ok  " : "FAIL", e->d_name, g ? "accepted" : err.message);
        }
        npl_gguf_close(g);
        ok ? passed++ : failed++;
    }
    closedir(d);
    printf("%d passed, %d failed\n", passed, failed);
    return failed || passed == 0 ? 1 : 0;
}
