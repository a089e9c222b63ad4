/* The engine worker's steps for the running jobs: one vision-tower
 * stage, one prefill chunk, one batched decode step; and each sampled
 * token through the job's output stream to the main context. */
#include "worker-private.h"

/* The stream's new text (aj->text) as answer and thinking events; at the
 * end, whatever the split still holds. FALSE when the job failed. */
static gboolean post_output(NpdWorker *w, ActiveJob *aj, gboolean end)
{
    npl_error err;
    npl_error_clear(&err);
    npl_buf_clear(&aj->answer);
    npl_buf_clear(&aj->thinking);
    npl_status st = npl_think_split_push(&aj->think, aj->text.data, aj->text.len, &aj->answer, &aj->thinking, &err);
    if (st == NPL_OK && end)
        st = npl_think_split_finish(&aj->think, &aj->answer, &aj->thinking, &err);
    if (st != NPL_OK) {
        npd_worker_job_fail(w, aj, st, "decoding the output", &err);
        return FALSE;
    }
    gboolean first = !aj->streamed;
    aj->streamed = aj->streamed || aj->thinking.len > 0 || aj->answer.len > 0;
    npd_event_post_text(w->events, aj->job->id, NPD_EVENT_THINKING, &aj->thinking, first);
    if (aj->tool_parser != NULL) {
        /* the answer goes through the parser: text in order with calls */
        st = npl_tool_parser_feed(aj->tool_parser, aj->answer.data, aj->answer.len, &err);
        if (st == NPL_OK && end)
            st = npl_tool_parser_finish(aj->tool_parser, &err);
        if (st != NPL_OK) {
            npd_worker_job_fail(w, aj, st, "parsing tool calls", &err);
            return FALSE;
        }
        npd_event_post_text(w->events, aj->job->id, NPD_EVENT_TEXT, &aj->tool_text, first);
        npl_buf_clear(&aj->tool_text);
        return TRUE;
    }
    npd_event_post_text(w->events, aj->job->id, NPD_EVENT_TEXT, &aj->answer, first);
    return TRUE;
}

/* Feeds a sampled token to the job's stream; finishes the job or makes
 * the token the next decode input. */
static void accept_sampled(NpdWorker *w, ActiveJob *aj, int32_t token)
{
    gint64 now = g_get_monotonic_time();
    if (aj->t_first == 0)
        aj->t_first = now;
    aj->t_last = now;
    npl_error err;
    npl_error_clear(&err);
    npl_buf_clear(&aj->text);
    npl_finish_reason reason = NPL_FINISH_STOP;
    if (token < 0) {
        /* the grammar allows no token: its output is whole, or the
         * vocabulary cannot spell what it needs */
        if (aj->matcher == NULL || !npl_grammar_matcher_is_complete(aj->matcher)) {
            npl_error_set(&err, NPL_ERR_INTERNAL, "no token of the vocabulary continues the grammar's output");
            npd_worker_job_fail(w, aj, NPL_ERR_INTERNAL, "sampling", &err);
            return;
        }
    } else {
        aj->generated++;
        reason = npl_stream_push(aj->stream, token, &aj->text, &err);
        if (err.code != NPL_OK) {
            npd_worker_job_fail(w, aj, err.code, "decoding the output", &err);
            return;
        }
        if (!post_output(w, aj, FALSE))
            return;
    }
    if (reason == NPL_FINISH_NONE) {
        aj->pending = token;
        aj->phase = PHASE_DECODE;
        return;
    }
    npl_buf_clear(&aj->text);
    npl_status st = npl_stream_finish(aj->stream, &aj->text, &err);
    if (st != NPL_OK) {
        npd_worker_job_fail(w, aj, st, "decoding the output", &err);
        return;
    }
    if (!post_output(w, aj, TRUE))
        return;
    if (aj->tool_parser != NULL && npl_tool_parser_calls(aj->tool_parser) > 0)
        npd_worker_job_finish(w, aj, NPD_FINISH_TOOL_CALLS, NULL);
    else
        npd_worker_job_finish(w, aj, reason == NPL_FINISH_LENGTH ? NPD_FINISH_LENGTH : NPD_FINISH_STOP, NULL);
}

static gboolean runs_before(const ActiveJob *a, const ActiveJob *b)
{
    if (a->job->priority != b->job->priority)
        return a->job->priority < b->job->priority;
    return a->admit_order < b->admit_order;
}

static ActiveJob *most_urgent(NpdWorker *w, Phase phase)
{
    ActiveJob *aj = NULL;
    for (guint i = 0; i < w->running->len; i++) {
        ActiveJob *c = w->running->pdata[i];
        if (c->phase == phase && (aj == NULL || runs_before(c, aj)))
            aj = c;
    }
    return aj;
}

/* One stage of the vision tower (patch embedding, one encoder block, or
 * the projector) for the most urgent image still being encoded: like a
 * prefill chunk, it delays other streams by one step at a time. A job's
 * images are encoded one after another; each keeps only its rows. */
void npd_worker_encode_step(NpdWorker *w)
{
    ActiveJob *aj = most_urgent(w, PHASE_ENCODE);
    if (aj == NULL)
        return;
    npl_error err;
    npl_error_clear(&err);
    JobImage *im = &aj->images[aj->encoded_images];
    if (aj->encoding == NULL) {
        /* decoded and preprocessed already (image-input.c): a copy, no more */
        aj->encoding = npl_vision_encoding_create_from_pixels(aj->lm->vision, &im->pixels->params, im->pixels->pixels,
                                                              &err);
        if (aj->encoding == NULL) {
            npd_worker_job_fail(w, aj, err.code, "preparing the image", &err);
            return;
        }
        npd_worker_job_drop_pixels(aj, aj->encoded_images);
    }
    bool done = false;
    npl_status st = npl_vision_encoding_step(aj->encoding, &done, &err);
    if (st != NPL_OK) {
        npd_worker_job_fail(w, aj, st, "encoding the image", &err);
        return;
    }
    if (!done)
        return;
    const npl_vision_info *vi = npl_vision_get_info(aj->lm->vision);
    im->n_rows = npl_vision_encoding_n_tokens(aj->encoding);
    im->rows = g_memdup2(npl_vision_encoding_output(aj->encoding), (gsize)im->n_rows * vi->n_embd_out * sizeof(float));
    g_clear_pointer(&aj->encoding, npl_vision_encoding_free);
    if (++aj->encoded_images == aj->n_images)
        aj->phase = PHASE_PREFILL;
}

/* The next image's rows (in one step: they attend to each other), keyed
 * for the KV pool. */
static npl_status prefill_image(ActiveJob *aj, npl_error *err)
{
    JobImage *im = &aj->images[aj->next_image];
    guint32 rows = im->n_rows;
    npl_status st = im->rows != NULL ? npl_prefill_embeddings(aj->lm->model, aj->seq, im->rows, rows, true, err)
                                     : npl_error_set(err, NPL_ERR_INTERNAL, "the image was not encoded");
    g_clear_pointer(&im->rows, g_free);
    if (st == NPL_OK)
        st = npl_seq_key_positions(aj->seq, (uint32_t)im->at, aj->prompt.ids + im->at, rows, err);
    if (st == NPL_OK) {
        aj->n_prefilled += rows;
        aj->next_image++;
    }
    return st;
}

/* One prefill chunk of the most urgent prompt still being fed: text up
 * to the next image, or that image's rows. */
void npd_worker_prefill_step(NpdWorker *w)
{
    ActiveJob *aj = most_urgent(w, PHASE_PREFILL);
    if (aj == NULL)
        return;
    npl_error err;
    npl_error_clear(&err);
    gboolean at_image = aj->next_image < aj->n_images && aj->images[aj->next_image].at == aj->n_prefilled;
    if (at_image) {
        npl_status st = prefill_image(aj, &err);
        if (st != NPL_OK) {
            npd_worker_job_fail(w, aj, st, "prefill of the image", &err);
            return;
        }
    } else {
        size_t end = aj->next_image < aj->n_images ? aj->images[aj->next_image].at : aj->prompt.n;
        size_t consumed = 0;
        size_t left = end - aj->n_prefilled;
        npl_status st = npl_prefill(aj->lm->model, aj->seq, aj->prompt.ids + aj->n_prefilled, left,
                                    w->cfg.prefill_chunk, &consumed, &err);
        if (st != NPL_OK) {
            npd_worker_job_fail(w, aj, st, "prefill", &err);
            return;
        }
        if (consumed == 0 || consumed > left) {
            npl_error_set(&err, NPL_ERR_INTERNAL, "prefill consumed %zu of %zu tokens", consumed, left);
            npd_worker_job_fail(w, aj, NPL_ERR_INTERNAL, "prefill", &err);
            return;
        }
        aj->n_prefilled += consumed;
    }
    if (aj->n_prefilled < aj->prompt.n)
        return;
    const float *logits = npl_seq_logits(aj->seq);
    if (logits == NULL) {
        npl_error_set(&err, NPL_ERR_INTERNAL, "no logits after the prompt");
        npd_worker_job_fail(w, aj, NPL_ERR_INTERNAL, "prefill", &err);
        return;
    }
    accept_sampled(w, aj, npl_sampler_sample(aj->sampler, logits));
}

/* One step of the most urgent job of another kind (an Embed's next
 * texts): like a prefill chunk, it delays other streams by one step. */
void npd_worker_kind_step(NpdWorker *w)
{
    ActiveJob *aj = most_urgent(w, PHASE_KIND);
    if (aj == NULL)
        return;
    npl_error err;
    npl_error_clear(&err);
    gboolean done = FALSE;
    npl_status st = aj->job->kind->step(aj->job->kind_state, aj->lm->model, &done, &err);
    if (st != NPL_OK)
        npd_worker_job_fail(w, aj, st, aj->job->kind->name, &err);
    else if (done)
        npd_worker_job_finish(w, aj, NPD_FINISH_STOP, NULL);
}

/* One batched decode step per loaded model for every generating job. */
void npd_worker_decode_step(NpdWorker *w)
{
    guint n = w->running->len;
    if (n == 0)
        return;
    ActiveJob **batch = g_new(ActiveJob *, n);
    npl_seq **seqs = g_new(npl_seq *, n);
    int32_t *tokens = g_new(int32_t, n);
    g_autoptr(GPtrArray) models = g_ptr_array_new();
    for (guint i = 0; i < n; i++) {
        ActiveJob *aj = w->running->pdata[i];
        if (aj->phase == PHASE_DECODE && !g_ptr_array_find(models, aj->lm, NULL))
            g_ptr_array_add(models, aj->lm);
    }
    for (guint m = 0; m < models->len; m++) {
        LoadedModel *lm = models->pdata[m];
        size_t nb = 0;
        for (guint i = 0; i < w->running->len; i++) {
            ActiveJob *aj = w->running->pdata[i];
            if (aj->phase == PHASE_DECODE && aj->lm == lm) {
                batch[nb] = aj;
                seqs[nb] = aj->seq;
                tokens[nb] = aj->pending;
                nb++;
            }
        }
        npl_error err;
        npl_error_clear(&err);
        npl_status st = npl_decode(lm->model, seqs, tokens, nb, &err);
        for (size_t i = 0; i < nb; i++) {
            ActiveJob *aj = batch[i];
            if (st != NPL_OK) {
                npd_worker_job_fail(w, aj, st, "decode", &err);
                continue;
            }
            const float *logits = npl_seq_logits(aj->seq);
            if (logits == NULL) {
                npl_error e2;
                npl_error_set(&e2, NPL_ERR_INTERNAL, "no logits after a decode step");
                npd_worker_job_fail(w, aj, NPL_ERR_INTERNAL, "decode", &e2);
                continue;
            }
            accept_sampled(w, aj, npl_sampler_sample(aj->sampler, logits));
        }
    }
    g_free(batch);
    g_free(seqs);
    g_free(tokens);
}
