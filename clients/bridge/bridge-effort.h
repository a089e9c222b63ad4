#pragma once

#include "bridge.h"

/* Ollama's "think": true, false, or a level ("low", "medium", "high",
 * gpt-oss's): a level is thinking on plus the option reasoning_effort.
 * null or absent leaves both unset. */
gboolean bridge_option_ollama_think(NpullmOptions *options, JsonNode *think, GError **error);

/* OpenAI's "reasoning_effort": "low", "medium" or "high" as the option
 * reasoning_effort; "minimal" is low (the least gpt-oss knows); "none" is
 * thinking off (enable_thinking false) and low effort, the nearest a
 * template gets to no reasoning. Absent or null: both unset. */
gboolean bridge_option_openai_effort(NpullmOptions *options, JsonObject *body, GError **error);
