/* npullm-run's conversation input: --messages JSON or @FILE. */
#ifndef NPULLM_RUN_MESSAGES_H
#define NPULLM_RUN_MESSAGES_H

/* The JSON text of --messages ARG: ARG itself, or the contents of FILE
 * when ARG is @FILE. malloc'd; NULL with a message on stderr on failure. */
char *run_messages_read(const char *arg);

#endif
