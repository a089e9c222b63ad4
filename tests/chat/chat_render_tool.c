/* Test helper for test_template_corpus.mjs: renders a chat template with
 * our Jinja engine, the way the engine does for a model.
 *
 *   chat_render_tool TEMPLATE_FILE BOS_TEXT EOS_TEXT
 *
 * stdin, per case, three lines: "case GEN THINK TIUM [EFFORT]" (GEN 0/1;
 * THINK, TIUM: enable_thinking, tools_in_user_message as -1 unset, 0, 1;
 * EFFORT: reasoning_effort, absent or "-" unset),
 * the messages as one line of JSON, the tools as one line of JSON or
 * "null". stdout, per case, one line: "ok HEX" (the rendering, hex) or
 * "err MESSAGE". The date comes from NPULLM_CHAT_DATE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_prompt.h"

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = (cap + 4096) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, 4096, f);
        n += k;
        if (k == 0)
            break;
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s TEMPLATE_FILE BOS_TEXT EOS_TEXT\n", argv[0]);
        return 2;
    }
    char *tmpl = read_file(argv[1]);
    if (!tmpl) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    char *head = NULL, *msgs = NULL, *tools = NULL;
    size_t ch = 0, cm = 0, ct = 0;
    while (getline(&head, &ch, stdin) > 0 && getline(&msgs, &cm, stdin) > 0 && getline(&tools, &ct, stdin) > 0) {
        int gen, think, tium;
        char effort[16] = "-";
        if (sscanf(head, "case %d %d %d %15s", &gen, &think, &tium, effort) < 3) {
            fprintf(stderr, "bad case line: %s", head);
            return 2;
        }
        chomp(msgs);
        chomp(tools);
        npl_chat_options o = {.add_generation_prompt = gen != 0, .enable_thinking = think, .tools_in_user_message = tium,
                              .tools_json = strcmp(tools, "null") ? tools : NULL,
                              .reasoning_effort = strcmp(effort, "-") ? effort : NULL};
        npl_chat_render_in in = {.template_src = tmpl, .bos_text = argv[2], .eos_text = argv[3],
                                 .messages_json = msgs, .opts = &o};
        npl_jinja_output out;
        npl_error err = {0};
        if (npl_chat_render(&in, &out, &err) == NPL_OK) {
            printf("ok ");
            for (size_t i = 0; i < out.len; i++)
                printf("%02x", (unsigned char)out.text[i]);
            printf("\n");
            npl_jinja_output_free(&out);
        } else {
            for (char *p = err.message; *p; p++)
                if (*p == '\n')
                    *p = ' ';
            printf("err %s\n", err.message);
        }
    }
    free(head);
    free(msgs);
    free(tools);
    free(tmpl);
    return 0;
}
