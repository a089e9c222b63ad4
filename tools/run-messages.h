/* npullm-run's conversation input: --messages JSON or @FILE, and the
 * --prompt/--system pair turned into the same JSON form. */
#ifndef NPULLM_RUN_MESSAGES_H
#define NPULLM_RUN_MESSAGES_H

/* The JSON text of --messages ARG: ARG itself, or the contents of FILE
 * when ARG is @FILE. malloc'd; NULL with a message on stderr on failure. */
char *run_messages_read(const char *arg);

/* [{"role":"system",...},]{"role":"user","content":prompt}] (malloc'd). */
char *run_messages_from_prompt(const char *system, const char *prompt);

#endif
