/*
 * keys.h - API key secrets: generation, keyed hashing, authentication.
 *
 * A secret looks like "gh_<43 base64url chars>" (256 random bits). Only a
 * keyed BLAKE2b-256 hash of it is stored, with its first 11 characters as
 * a visible prefix for listing. The hashing key lives in a file beside the
 * database (created 0600 at first use), so a leaked database alone does
 * not allow offline guessing. Secrets are wiped after use and never logged.
 * Thread-safe.
 */
#ifndef GH_KEYS_H
#define GH_KEYS_H

#include <stddef.h>

#include "err.h"
#include "store.h"

#define GH_KEY_SECRET_MAX 64
#define GH_KEY_PREFIX_LEN 11

/* 1 when s is a usable key name, owner or policy name: 1..GH_NAME_MAX bytes
 * without control characters. */
int gh_name_ok(const char *s);

/* Loads the 32-byte hashing key, creating it when absent and create != 0. */
enum gh_code gh_keys_load_hashkey(const char *path, int create, unsigned char key[32],
				  struct gh_err *e);

/* Fills secret (GH_KEY_SECRET_MAX bytes) with a new random secret. */
void gh_keys_generate(char secret[GH_KEY_SECRET_MAX]);

/* hash = BLAKE2b-256 keyed with hashkey over the secret's bytes. */
void gh_keys_hash(const unsigned char hashkey[32], const char *secret, unsigned char out[32]);

/* Creates a key: generates the secret (written to secret_out, caller wipes
 * it), stores the hash, fills k (id, prefix, created_at). k->name, owner,
 * policy and admin must be set by the caller. */
enum gh_code gh_keys_create(struct gh_store *s, const unsigned char hashkey[32],
			    struct gh_key *k, char secret_out[GH_KEY_SECRET_MAX],
			    struct gh_err *e);

/* Resolves "Authorization: Bearer <secret>" to a live key. GH_E_AUTH with
 * "missing API key", "invalid API key" or "API key revoked". */
enum gh_code gh_keys_authenticate(struct gh_store *s, const unsigned char hashkey[32],
				  const char *authorization, struct gh_key *out,
				  struct gh_err *e);

#endif
