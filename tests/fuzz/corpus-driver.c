/* Replays fuzz inputs without libFuzzer: each argument is a file or a
 * directory of files, fed one by one to LLVMFuzzerTestOneInput. Lets the
 * seed corpus (and any saved crash) run as a normal test. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_target.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    bool read_error = ferror(f);
    fclose(f);
    if (!buf || read_error) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return -1;
    }
    /* an exact-size copy so sanitizers catch reads past the end */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    printf("ok %s (%zu bytes)\n", path, len);
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file in dir in name order; returns files run or -1. */
static int run_dir(const char *dir)
{
    struct dirent **entries;
    int n = scandir(dir, &entries, NULL, NULL);
    if (n < 0) {
        perror(dir);
        return -1;
    }
    char **names = calloc((size_t)n + 1, sizeof *names);
    int count = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        if (names && entries[i]->d_name[0] != '.')
            names[count++] = strdup(entries[i]->d_name);
        free(entries[i]);
    }
    free(entries);
    if (!names)
        return -1;
    qsort(names, (size_t)count, sizeof *names, compare_names);
    for (int i = 0; i < count; i++) {
        char path[4096];
        struct stat st;
        if (!names[i]) {
            ran = -1;
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && ran >= 0)
            ran = run_file(path) == 0 ? ran + 1 : -1;
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    int total = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            perror(argv[a]);
            return 1;
        }
        int n = S_ISDIR(st.st_mode) ? run_dir(argv[a]) : run_file(argv[a]) == 0 ? 1 : -1;
        if (n < 0)
            return 1;
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    printf("%d inputs replayed\n", total);
    return 0;
}
