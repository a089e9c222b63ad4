/* The engine worker: one thread that owns the engine (models, KV caches,
 * the device) and schedules every request on it. The main loop talks to it
 * only through a command queue; the worker answers with events delivered
 * on the main context, in order, with consecutive text of one request
 * coalesced (never dropped or reordered).
 *
 * Scheduling, one iteration: drain commands (cancels take effect here),
 * admit queued jobs into free slots (interactive before background; within
 * a class round-robin between users, FIFO for each user; loading the model
 * first if needed; parking a running job of the user holding the most
 * slots so that slots are shared between users), feed one prefill
 * chunk of one prompt, then run ONE batched decode step for all sequences
 * that are generating. So a long prompt only delays other streams by one
 * chunk per token. Prompts are rendered (chat template) and tokenized on
 * render threads, never on the engine thread. */
#ifndef NPD_ENGINE_WORKER_H
#define NPD_ENGINE_WORKER_H

#include <glib.h>

#include "dbus-errors.h"
#include "image-budget.h"
#include "job-kind.h"
#include "npullm.h"
#include "request-options.h"
#include "vision.h"

typedef enum {
    NPD_JOB_QUEUED,
    NPD_JOB_LOADING,
    NPD_JOB_RUNNING,
    NPD_JOB_FINISHED,
} NpdJobState;

typedef enum {
    NPD_FINISH_STOP,
    NPD_FINISH_LENGTH,
    NPD_FINISH_CANCELLED,
    NPD_FINISH_ERROR,
    NPD_FINISH_TOOL_CALLS, /* the output was (or ended with) tool calls */
} NpdFinishReason;

const char *npd_finish_reason_name(NpdFinishReason reason);

/* An image decoded and preprocessed for one projector, off the engine
 * thread (image-input.c): the engine only copies it into an encoding.
 * Its tensor stays charged to the image budget until it is freed, so
 * images waiting in queued requests count against MaxImageMemory. */
typedef struct {
    npl_vision_pixel_params params;
    float *pixels;          /* npl_vision_pixels_len(&params, pixels) floats */
    NpdImageBudget *budget; /* charged bytes given back here when freed */
    guint64 charged;
} NpdImagePixels;

void npd_image_pixels_free(NpdImagePixels *px);

/* A uid the bus would not tell (NpdJob.uid, NpdClient.uid). */
#define NPD_UID_UNKNOWN G_MAXUINT32

/* What to generate; immutable once submitted (the worker owns it). */
typedef struct {
    guint64 id;
    gchar *model_name;
    gchar *model_path;
    gchar *projector_path;  /* its vision projector (the catalog's pairing), NULL: none */
    gboolean raw;           /* prompt is plain text, no chat template */
    gchar *prompt;          /* raw prompt (raw only) */
    GPtrArray *messages;    /* NpdChatMessage*, chat template applied */
    npl_sampler_params sampling;
    guint32 max_tokens;     /* 0: the configured default, capped by context */
    gchar **stop;
    NpdPriority priority;
    GPtrArray *images;      /* NpdImagePixels*, preprocessed, in the order of the
                             * messages' n_images (each shown before its message's
                             * text); NULL without images */
    guint32 uid;            /* the caller's user: the queue is fair between users */
    gint think;             /* enable_thinking: -1 the template's default, 0 off, 1 on */
    const char *reasoning_effort; /* static; NULL: the template's default */
    npl_grammar *grammar;   /* the format option compiled (owned), NULL: free text */
    NpdTools *tools;        /* offered to the template (owned), NULL: none */
    gchar *tool_choice;     /* NULL or "auto", "required", a tool's name */
    /* Not generation (job-kind.h): the kind and its state (owned; the
     * kind's steps advance it on the engine thread); NULL: generation */
    const NpdJobKind *kind;
    gpointer kind_state;
} NpdJob;

void npd_job_free(NpdJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdJob, npd_job_free)

typedef struct NpdJobStats {
    guint32 prompt_tokens;
    guint32 cached_tokens; /* prompt positions reused from the user's KV caches */
    guint32 encoded_images; /* images run through the vision tower (not reused) */
    guint32 generated_tokens;
    double time_to_first_token_ms;
    double tokens_per_second;
    double total_time_ms;
    guint64 seed;
    /* where its prompt and its tokens were computed, and how often its
     * KV cache moved between them (the phase split) */
    gchar prefill_device[32], decode_device[32];
    guint32 kv_moves;
} NpdJobStats;

/* prefill_device, decode_device and kv_moves of a request's stats, when
 * it computed anything (worker/phase-split.c). */
void npd_job_stats_add_phases(GVariantBuilder *b, const NpdJobStats *stats);

typedef enum {
    NPD_EVENT_STATE,        /* job_id, state, queue_position */
    NPD_EVENT_TEXT,         /* job_id, text */
    NPD_EVENT_THINKING,     /* job_id, text: the model's thinking (<think>...</think>) */
    NPD_EVENT_FINISHED,     /* job_id, reason, stats, error (when reason is error) */
    NPD_EVENT_MODELS,       /* loaded_models changed */
    NPD_EVENT_COMMAND_DONE, /* tag, error (LoadModel/UnloadModel/ForgetCache) */
    NPD_EVENT_TOOL_CALL,    /* job_id, tool_call: id, name, arguments */
} NpdEventKind;

typedef struct {
    NpdEventKind kind;
    guint64 job_id;
    NpdJobState state;
    guint queue_position;
    GString *text;
    NpdFinishReason reason;
    NpdJobStats stats;
    GError *error;
    gchar **loaded_models;
    gpointer tag;
    gchar **tool_call; /* NPD_EVENT_TOOL_CALL: {id, name, arguments, NULL} */
    gpointer result;   /* NPD_EVENT_FINISHED of a job kind's job: its state */
    GDestroyNotify result_free;
} NpdEvent;

/* Called on the main context with each event (the event is freed after). */
typedef void (*NpdEventFunc)(const NpdEvent *event, gpointer user_data);

typedef struct {
    const char *device; /* npl_model_params.device: "cpu", "npu-emu" or "npu" */
    const char *npu_cache_dir; /* npl_model_params.npu_cache_dir; "" = none */
    const char *weight_cache_dir; /* npl_model_params.weight_cache_dir; "" = none */
    guint threads;
    guint prefill_chunk;
    guint max_running;
    guint max_context;
    guint default_max_tokens;
    guint idle_timeout;
    guint64 kv_cache_bytes; /* per loaded model, for prefix reuse; 0 = none */
} NpdWorkerConfig;

typedef struct NpdWorker NpdWorker;

/* Starts the thread; events are dispatched on main_context. */
NpdWorker *npd_worker_new(const NpdWorkerConfig *cfg, GMainContext *main_context, NpdEventFunc func,
                          gpointer user_data);
/* Cancels everything, unloads the models, joins the thread; pending
 * events are discarded. */
void npd_worker_free(NpdWorker *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdWorker, npd_worker_free)

/* The events of requests (job_id != 0: state, text, thinking, tool calls,
 * finished) go to func instead of the worker's own (NULL: back to it), so
 * that they reach the requests' registry directly. Main context only. */
void npd_worker_set_request_func(NpdWorker *w, NpdEventFunc func, gpointer user_data);
void npd_worker_submit(NpdWorker *w, NpdJob *job);
void npd_worker_cancel(NpdWorker *w, guint64 job_id);
/* Completion arrives as NPD_EVENT_COMMAND_DONE carrying tag. */
void npd_worker_load(NpdWorker *w, const char *name, const char *path, const char *projector, gpointer tag);
void npd_worker_unload(NpdWorker *w, const char *name, gpointer tag);
void npd_worker_set_idle_timeout(NpdWorker *w, guint seconds);
/* Drops the KV caches kept for uid's requests, in every loaded model;
 * completion arrives as NPD_EVENT_COMMAND_DONE carrying tag. */
void npd_worker_forget_cache(NpdWorker *w, guint32 uid, gpointer tag);

/* The power policy (power-policy.c): threads computing in every model (0:
 * all of cfg.threads) and whether background requests wait in the queue
 * (running ones go on). From the next scheduling step; output unchanged.
 * cpu_decode: models on an NPU decode on the CPU (worker/phase-split.c),
 * each running sequence's cache moved at its next decode step. */
void npd_worker_set_power(NpdWorker *w, guint threads, gboolean background_paused, gboolean cpu_decode);
/* Sleep (sleep-inhibit.c): after the current step nothing is scheduled;
 * the KV caches kept for reuse are freed, and with unload the models no
 * request uses are unloaded; then NPD_EVENT_COMMAND_DONE carries tag.
 * Running requests keep their state and continue after resume. */
void npd_worker_suspend(NpdWorker *w, gboolean unload, gpointer tag);
void npd_worker_resume(NpdWorker *w);

#endif
