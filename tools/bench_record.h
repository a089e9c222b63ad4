/* npullm-bench --record FILE: the run's JSON object appended to a results
 * file (bench_record.c). */
#ifndef NPULLM_BENCH_RECORD_H
#define NPULLM_BENCH_RECORD_H

#include <stdbool.h>

/* Captures stdout from here on; at exit the captured JSON object is
 * printed as usual and appended to path as one line with the date, the
 * CPU, the load average and the command line. False (errno set) when the
 * capture cannot be set up. */
bool bench_record_start(const char *path, int argc, char **argv);

#endif
