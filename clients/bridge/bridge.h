/* npullm-bridge: Ollama's and OpenAI's HTTP APIs for one user, served on
 * loopback and answered by npullmd over the system bus as that user. */
#pragma once

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <npullm.h>

typedef struct {
    NpullmClient *client;
    SoupServer *server;
    GMainLoop *loop;
    uid_t uid;          /* only this user's connections are served */
    char *token;        /* bearer token required when set */
    guint idle_exit;    /* seconds without a request before exiting; 0: never */
    guint active;       /* requests being answered */
    guint idle_source;
    GPtrArray *listeners;  /* bridge-accept.c */
    GHashTable *by_peer;   /* peer address -> open connection (bridge-accept.c) */
    guint connections;     /* open, counted against BRIDGE_MAX_CONNECTIONS */
    guint header_timeout;  /* seconds a connection may take to send a request, or stay idle */
    guint accept_retry;    /* accepting again after EMFILE and the like */
    GList *refusals;       /* refused connections being closed (bridge-accept.c) */
} Bridge;

/* Which API's error shape and status mapping a handler uses. */
typedef enum {
    BRIDGE_API_OLLAMA,
    BRIDGE_API_OPENAI,
} BridgeApi;

void bridge_hold(Bridge *bridge);
void bridge_release(Bridge *bridge);

/* A handler for @path, behind the guard (bridge-guard.h). */
void bridge_add_handler(Bridge *bridge, const char *path, SoupServerCallback callback);

void bridge_ollama_register(Bridge *bridge);
void bridge_openai_register(Bridge *bridge);
