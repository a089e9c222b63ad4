/* Test helper for test_chat_oracle.mjs: builds chat prompts with
 * npl_chat_build_tokens and prints the ids.
 *
 *   chat_tokens_tool MODEL.gguf FORMAT   (FORMAT: llama3|gemma|chatml|auto)
 *
 * stdin, per conversation: a line "conv GEN N" (GEN 0/1), then N lines
 * "ROLE HEX" with the content hex-encoded (so any text survives).
 * stdout, per conversation: "ok ID ID ..." or "err STATUS MESSAGE".
 * The first output line is "format NAME GUESSED". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "gguf.h"
#include "npl_test.h"
#include "tokenizer.h"

#define MAX_MESSAGES 64
#define MAX_LINE (1u << 20)

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf llama3|gemma|chatml|auto\n", argv[0]);
        return 2;
    }
    npl_error err = {0};
    npl_gguf *g = npl_gguf_open(argv[1], &err);
    if (!g) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    npl_tokenizer *tok = npl_tokenizer_from_gguf(g, &err);
    if (!tok) {
        fprintf(stderr, "%s\n", err.message);
        npl_gguf_close(g);
        return 1;
    }
    bool guessed = false;
    npl_chat_format f;
    if (strcmp(argv[2], "llama3") == 0)
        f = NPL_CHAT_LLAMA3;
    else if (strcmp(argv[2], "gemma") == 0)
        f = NPL_CHAT_GEMMA;
    else if (strcmp(argv[2], "chatml") == 0)
        f = NPL_CHAT_CHATML;
    else
        f = npl_chat_format_detect(g, &guessed);
    printf("format %s %d\n", npl_chat_format_name(f), guessed ? 1 : 0);

    char *line = malloc(MAX_LINE);
    char *contents[MAX_MESSAGES] = {0};
    char *roles[MAX_MESSAGES] = {0};
    int status = 0;
    if (!line) {
        fprintf(stderr, "out of memory\n");
        status = 1;
    }
    while (status == 0 && fgets(line, MAX_LINE, stdin)) {
        int gen = 0, n = 0;
        if (sscanf(line, "conv %d %d", &gen, &n) != 2 || n < 0 || n > MAX_MESSAGES) {
            fprintf(stderr, "bad conversation header: %s", line);
            status = 2;
            break;
        }
        npl_chat_message msgs[MAX_MESSAGES];
        for (int i = 0; i < n && status == 0; i++) {
            if (!fgets(line, MAX_LINE, stdin)) {
                fprintf(stderr, "missing message line\n");
                status = 2;
                break;
            }
            chomp(line);
            char *space = strchr(line, ' ');
            if (!space) {
                fprintf(stderr, "bad message line\n");
                status = 2;
                break;
            }
            *space = '\0';
            free(roles[i]);
            free(contents[i]);
            roles[i] = strdup(line);
            contents[i] = strdup(space + 1);
            if (!roles[i] || !contents[i] || nt_unhex(contents[i], strlen(contents[i])) < 0) {
                fprintf(stderr, "bad message content\n");
                status = 2;
                break;
            }
            msgs[i].role = roles[i];
            msgs[i].content = contents[i];
        }
        if (status)
            break;
        npl_tokens out = {0};
        if (npl_chat_build_tokens(tok, f, msgs, (size_t)n, gen != 0, &out, &err) == NPL_OK) {
            fputs("ok", stdout);
            for (size_t i = 0; i < out.n; i++)
                printf(" %d", (int)out.ids[i]);
            fputc('\n', stdout);
        } else {
            printf("err %s %s\n", npl_status_name(err.code), err.message);
        }
        npl_tokens_free(&out);
        fflush(stdout);
    }
    for (int i = 0; i < MAX_MESSAGES; i++) {
        free(roles[i]);
        free(contents[i]);
    }
    free(line);
    npl_tokenizer_free(tok);
    npl_gguf_close(g);
    return status;
}
