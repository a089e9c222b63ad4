/* What a known architecture the table has no entry for still lacks: the
 * piece the loader's refusal names (ListModels' reason). */
#ifndef NPL_MODEL_REFUSALS_H
#define NPL_MODEL_REFUSALS_H

/* The missing piece of architecture NAME ("mixture-of-experts layers"),
 * or NULL for a name this list does not know. Consulted only for names
 * the architecture table lacks. */
const char *npl_arch_missing_piece(const char *name);

#endif
