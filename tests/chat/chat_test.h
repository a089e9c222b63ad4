/* Minimal check macros for the chat tests: count checks, report failures
 * with file:line, exit non-zero at the end when anything failed. */
#ifndef CHAT_TEST_H
#define CHAT_TEST_H

#include <stdio.h>

typedef struct chat_test_counts {
    unsigned checks;
    unsigned failures;
} chat_test_counts;

extern chat_test_counts chat_test_state;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        chat_test_state.checks++;                                                                  \
        if (!(cond)) {                                                                             \
            chat_test_state.failures++;                                                            \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        chat_test_state.checks++;                                                                  \
        if (!(cond)) {                                                                             \
            chat_test_state.failures++;                                                            \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Prints the tally; returns the process exit status. */
static inline int chat_test_report(const char *name)
{
    printf("%s: %u checks, %u failed\n", name, chat_test_state.checks, chat_test_state.failures);
    return chat_test_state.failures ? 1 : 0;
}

#endif
