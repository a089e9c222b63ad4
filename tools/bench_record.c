/* npullm-bench --record FILE: keeps a measurement's history beside the
 * code (bench/results-<machine kind>.jsonl) instead of in the docs. The
 * benchmarks print one JSON object on stdout; this captures it and, at
 * exit, appends it as the "result" of one line saying when, on what CPU,
 * at what load and with which command it was measured. A run that fails
 * prints no object and records nothing. */
#include "bench_record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define RECORD_MAX (1 << 20) /* the largest object recorded */

static struct {
    const char *path;
    char command[4096];
    FILE *capture; /* stdout's object goes here first */
    int real_stdout;
} rec;

/* Appends s to out as a JSON string (quotes, backslashes and controls
 * escaped); returns the new length, at most cap - 1. */
static size_t put_json_string(char *out, size_t len, size_t cap, const char *s)
{
    if (len + 1 < cap)
        out[len++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && len + 8 < cap; p++) {
        if (*p == '"' || *p == '\\')
            len += (size_t)snprintf(out + len, cap - len, "\\%c", *p);
        else if (*p < 0x20)
            len += (size_t)snprintf(out + len, cap - len, "\\u%04x", *p);
        else
            out[len++] = (char)*p;
    }
    if (len + 1 < cap)
        out[len++] = '"';
    out[len] = '\0';
    return len;
}

/* The CPU's model name as /proc/cpuinfo reports it, or the machine type. */
static void cpu_model(char *out, size_t cap)
{
    struct utsname u;
    snprintf(out, cap, "%s", uname(&u) == 0 ? u.machine : "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && colon) {
            colon += strspn(colon + 1, " \t") + 1;
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(out, cap, "%s", colon);
            break;
        }
    }
    fclose(f);
}

/* The captured output, trimmed, with newlines as spaces (one JSONL line);
 * NULL when it is not one JSON object. */
static char *captured_object(void)
{
    off_t n = lseek(fileno(rec.capture), 0, SEEK_END);
    if (n <= 0 || n > RECORD_MAX)
        return NULL;
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        return NULL;
    rewind(rec.capture);
    size_t got = fread(buf, 1, (size_t)n, rec.capture);
    buf[got] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    while (got > 0 && buf[got - 1] == ' ')
        buf[--got] = '\0';
    if (got < 2 || buf[0] != '{' || buf[got - 1] != '}') {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The record's line: {"date", "cpu", "cpus", "load", "command", "result"}. */
static char *record_line(const char *object)
{
    size_t cap = strlen(object) + 8192;
    char *line = malloc(cap);
    if (!line)
        return NULL;
    char date[32], cpu[256];
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    cpu_model(cpu, sizeof cpu);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) != 3)
        load[0] = load[1] = load[2] = -1;
    size_t len = (size_t)snprintf(line, cap, "{\"date\": \"%s\", \"cpu\": ", date);
    len = put_json_string(line, len, cap, cpu);
    len += (size_t)snprintf(line + len, cap - len, ", \"cpus\": %ld, \"load\": [%.2f, %.2f, %.2f], \"command\": ",
                            sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
    len = put_json_string(line, len, cap, rec.command);
    snprintf(line + len, cap - len, ", \"result\": %s}\n", object);
    return line;
}

/* Appends line in one write, so concurrent recorders do not interleave. */
static void append_line(const char *line)
{
    int fd = open(rec.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    size_t n = strlen(line);
    if (fd < 0 || write(fd, line, n) != (ssize_t)n)
        fprintf(stderr, "npullm-bench: cannot append to %s: %s\n", rec.path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* At exit: the object goes to the real stdout as usual, then to the file. */
static void finish(void)
{
    fflush(stdout);
    dup2(rec.real_stdout, STDOUT_FILENO);
    char *object = captured_object();
    if (object) {
        printf("%s\n", object);
        fflush(stdout);
        char *line = record_line(object);
        if (line)
            append_line(line);
        free(line);
        fprintf(stderr, "npullm-bench: recorded in %s\n", rec.path);
    }
    free(object);
    fclose(rec.capture);
}

bool bench_record_start(const char *path, int argc, char **argv)
{
    rec.path = path;
    size_t len = (size_t)snprintf(rec.command, sizeof rec.command, "npullm-bench");
    for (int i = 1; i < argc && len < sizeof rec.command; i++)
        len += (size_t)snprintf(rec.command + len, sizeof rec.command - len, " %s", argv[i]);
    /* fail early on a path that cannot be written, before a long run */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return false;
    close(fd);
    rec.capture = tmpfile();
    if (!rec.capture)
        return false;
    fflush(stdout);
    rec.real_stdout = dup(STDOUT_FILENO);
    if (rec.real_stdout < 0 || dup2(fileno(rec.capture), STDOUT_FILENO) < 0)
        return false;
    return atexit(finish) == 0;
}
