/* The engine worker's state, shared by its parts (worker/): the thread
 * and its commands (engine-worker.c), model residency (models.c), jobs
 * from start to finish (job.c) and their steps (steps.c). Everything but
 * the command queue and the event channel is the worker thread's alone. */
#ifndef NPD_WORKER_PRIVATE_H
#define NPD_WORKER_PRIVATE_H

#include "engine-worker.h"
#include "events.h"
#include "fair-queue.h"
#include "grammar.h"
#include "think_split.h"
#include "tokenizer.h"
#include "vision.h"

typedef struct {
    gchar *name;
    gchar *path;
    npl_model *model;
    npl_kv_pool *kv_pool; /* finished sequences by uid, for prefix reuse */
    npl_vision *vision;   /* its projector, when NAME.mmproj.gguf loaded */
    gchar *vision_error;  /* why not, when the file exists but did not load */
    npl_vocab_index *vocab_index; /* for grammar masks, built on first use */
    gint64 last_used; /* monotonic usec */
    guint n_jobs;     /* running jobs on this model */
} LoadedModel;

typedef struct {
    NpdJob *job;
    gint64 t_submit;
    guint reported_position; /* last QueuePosition sent, 0 = none yet */
} QueuedJob;

typedef enum {
    PHASE_ENCODE, /* the image through the vision tower, one stage per step */
    PHASE_PREFILL,
    PHASE_DECODE,
    PHASE_RENDER, /* the prompt being rendered and tokenized on a render thread */
    PHASE_KIND,   /* a job of another kind (job-kind.h), stepped by npd_worker_kind_step */
} Phase;

/* An image of a running job: where its rows go, then its rows. */
typedef struct {
    size_t at;              /* prompt position of its first row */
    NpdImagePixels *pixels; /* until copied into an encoding or found in the
                             * KV pool (job->images owns it) */
    float *rows;            /* its embedding rows, encoded, until prefilled */
    guint32 n_rows;         /* how many (Gemma 4's tower: depends on the image) */
} JobImage;

typedef struct {
    NpdJob *job;
    LoadedModel *lm;
    npl_seq *seq;
    npl_sampler *sampler;
    npl_grammar_matcher *matcher; /* the format option's, NULL: free text */
    npl_grammar *tool_grammar;    /* tool_choice required or a name: the call's */
    npl_tool_parser *tool_parser; /* tools offered: the answer -> text and calls */
    npl_buf tool_text;            /* the answer's text the parser passed on */
    NpdWorker *worker;            /* for the parser's callbacks */
    npl_stream *stream;
    /* every position of the prompt: token ids, and for each image's rows
     * the keys of its pixels (npl_vision_image_keys), so that the KV pool
     * reuses an image's positions like text */
    npl_tokens prompt;
    JobImage *images;
    guint n_images;
    guint next_image;     /* the first not yet prefilled */
    guint first_encoded;  /* images before it were in the reused prefix */
    guint encoded_images; /* [first_encoded, encoded_images) went through the tower */
    npl_vision_encoding *encoding; /* of image encoded_images, running */
    size_t n_prefilled;
    guint32 n_cached; /* of them, reused from the pool */
    int32_t pending; /* sampled token to append in the next decode step */
    Phase phase;
    guint64 admit_order;
    gint64 t_submit;
    gint64 t_first;
    gint64 t_last;
    guint32 generated;
    gboolean streamed; /* some text was posted */
    npl_buf text;
    npl_think_split think; /* thinking apart from the answer */
    npl_buf answer, thinking;
} ActiveJob;

/* A prompt rendered (chat template) and tokenized off the engine thread:
 * a template may take up to its render deadline, and the engine must keep
 * stepping everyone else's streams meanwhile. The task holds its own
 * references to the job's inputs, and its model's n_jobs count, until the
 * engine thread takes its result (CMD_RENDERED): a job cancelled while
 * rendering ends at once, its render finishes on its own (within the
 * template's deadline) and is dropped. Rendering only reads the model's
 * GGUF metadata and tokenizer, which serve several threads at once. */
typedef struct {
    guint64 job_id;
    LoadedModel *lm;
    gboolean raw;
    gchar *prompt;       /* raw */
    GPtrArray *messages; /* NpdChatMessage*, a reference */
    guint n_images;
    gint think;
    const char *reasoning_effort; /* static, or NULL */
    gchar *messages_json; /* with tools or tool messages: the conversation as JSON */
    gchar *tools_json;    /* the tools offered to the template, or NULL */
    /* the result */
    npl_status st;
    npl_error err;
    npl_tokens ids;  /* without images: the prompt */
    npl_tokens *runs; /* with images: n_images + 1 token runs between them */
    char *text;      /* the rendered prompt, for the thinking split */
} RenderTask;

typedef enum {
    CMD_SUBMIT,
    CMD_RENDERED,
    CMD_CANCEL,
    CMD_LOAD,
    CMD_UNLOAD,
    CMD_SET_IDLE,
    CMD_FORGET_CACHE,
    CMD_POWER,   /* threads, background_paused (pause.c) */
    CMD_SUSPEND, /* unload, tag */
    CMD_RESUME,
    CMD_QUIT,
} CommandKind;

typedef struct {
    CommandKind kind;
    NpdJob *job;
    guint64 job_id;
    gchar *name;
    gchar *path;
    gchar *projector;
    gpointer tag;
    guint seconds;
    guint32 uid;
    gint64 t_submit;
    RenderTask *rendered;
    guint threads;              /* CMD_POWER: 0 = all of cfg.threads */
    gboolean background_paused; /* CMD_POWER */
    gboolean cpu_decode;        /* CMD_POWER */
    gboolean unload;            /* CMD_SUSPEND */
} Command;

struct NpdWorker {
    NpdWorkerConfig cfg; /* idle_timeout is changed on the worker thread only */
    GThread *thread;
    GAsyncQueue *commands;
    NpdEventChannel *events; /* to the main context */

    /* worker thread only */
    NpdFairQueue *queue; /* QueuedJob* */
    GPtrArray *running;  /* ActiveJob*, in admission order */
    GPtrArray *parked;   /* ActiveJob*, paused to share the slots, oldest first */
    GHashTable *models;  /* name -> LoadedModel* */
    guint64 admit_counter;
    GThreadPool *renders; /* RenderTask*, answered with CMD_RENDERED */
    /* the power policy and sleep (pause.c) */
    guint active_threads;       /* computing threads of every model, 0 = all */
    gboolean background_paused; /* background jobs stay queued */
    gboolean cpu_decode;        /* models on an NPU decode on the CPU (phase-split.c) */
    gboolean suspended;         /* nothing is scheduled until resumed */
};

/* ---- commands (engine-worker.c) ---- */
/* A zeroed command of that kind, for w->commands. */
Command *npd_worker_command_new(CommandKind kind);

/* ---- the power policy and sleep (pause.c) ---- */
/* CMD_POWER, CMD_SUSPEND, CMD_RESUME; between scheduling steps. */
void npd_worker_pause_command(NpdWorker *w, const Command *cmd);
/* Whether queued job may start now (not a background one while they are
 * paused). */
gboolean npd_worker_may_start(NpdWorker *w, const NpdJob *job);

/* ---- the phase split (phase-split.c) ---- */
/* Tells a model where to decode under the power policy (w->cpu_decode). */
void npd_worker_apply_decode_device(NpdWorker *w, LoadedModel *lm);
/* Where a job's prompt and tokens ran, for its stats. */
void npd_worker_job_devices(const ActiveJob *aj, NpdJobStats *stats);

/* ---- models (models.c) ---- */
void npd_worker_model_free(LoadedModel *lm);
/* The model, loaded now if it is not; NULL with error when it fails. */
LoadedModel *npd_worker_model_ensure(NpdWorker *w, const char *name, const char *path, const char *projector,
                                     GError **error);
/* UnloadModel: answered with a command-done event carrying tag. */
void npd_worker_model_unload(NpdWorker *w, const char *name, gpointer tag);
void npd_worker_models_unload_idle(NpdWorker *w);
/* Every model no running or parked job uses (sleep, pause.c). */
void npd_worker_models_unload_unused(NpdWorker *w);
/* Monotonic time of the next idle unload, or -1 when none is due. */
gint64 npd_worker_models_next_unload(NpdWorker *w);
/* ForgetCache: uid's cached sequences, in every loaded model. */
void npd_worker_models_forget_cache(NpdWorker *w, guint32 uid);

/* ---- jobs (job.c) ---- */
void npd_worker_render_task_free(RenderTask *t);
/* On a render thread (the render pool's function). */
void npd_worker_render_prompt(gpointer data, gpointer user_data);
/* Moves a queued job to the running set (its model loaded first). */
void npd_worker_job_start(NpdWorker *w, QueuedJob *qj);
/* A render thread's result (CMD_RENDERED). */
void npd_worker_job_rendered(NpdWorker *w, RenderTask *t);
ActiveJob *npd_worker_job_find(NpdWorker *w, guint64 job_id);
/* Each takes error. */
void npd_worker_job_finish(NpdWorker *w, ActiveJob *aj, NpdFinishReason reason, GError *error);
void npd_worker_job_finish_queued(NpdWorker *w, QueuedJob *qj, NpdFinishReason reason, GError *error);
void npd_worker_job_fail(NpdWorker *w, ActiveJob *aj, npl_status st, const char *what, const npl_error *err);
/* Image k's pixels are no longer needed (its keys are in the prompt):
 * freed now, which gives their bytes back to the image budget. */
void npd_worker_job_drop_pixels(ActiveJob *aj, guint k);

/* ---- steps (steps.c) ---- */
void npd_worker_encode_step(NpdWorker *w);
void npd_worker_prefill_step(NpdWorker *w);
/* One step of the most urgent job of another kind (job-kind.h). */
void npd_worker_kind_step(NpdWorker *w);
void npd_worker_decode_step(NpdWorker *w);

#endif
