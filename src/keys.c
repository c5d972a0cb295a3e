/*
 * keys.c - API key secrets; see keys.h.
 */
#include "keys.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "util.h"

enum gh_code gh_keys_load_hashkey(const char *path, int create, unsigned char key[32],
				  struct gh_err *e)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0 && errno == ENOENT && create) {
		randombytes_buf(key, 32);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST)
			return gh_keys_load_hashkey(path, 0, key, e); /* lost a race */
		if (fd < 0)
			return gh_err_set(e, GH_E_IO, "%s: cannot create the key hashing secret: %s",
					  path, strerror(errno));
		n = write(fd, key, 32);
		if (n != 32 || fsync(fd) != 0) {
			close(fd);
			unlink(path);
			return gh_err_set(e, GH_E_IO, "%s: cannot write the key hashing secret", path);
		}
		close(fd);
		return GH_OK;
	}
	if (fd < 0)
		return gh_err_set(e, GH_E_IO, "%s: cannot open the key hashing secret: %s", path,
				  strerror(errno));
	if (fstat(fd, &st) != 0 || (st.st_mode & 077)) {
		close(fd);
		return gh_err_set(e, GH_E_IO, "%s: must not be readable by group or others (chmod 600)",
				  path);
	}
	n = read(fd, key, 32);
	close(fd);
	if (n != 32)
		return gh_err_set(e, GH_E_IO, "%s: not a key hashing secret (want 32 bytes)", path);
	return GH_OK;
}

int gh_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > GH_NAME_MAX)
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

void gh_keys_generate(char secret[GH_KEY_SECRET_MAX])
{
	unsigned char rnd[32];

	randombytes_buf(rnd, sizeof(rnd));
	memcpy(secret, "gh_", 3);
	sodium_bin2base64(secret + 3, GH_KEY_SECRET_MAX - 3, rnd, sizeof(rnd),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(rnd, sizeof(rnd));
}

void gh_keys_hash(const unsigned char hashkey[32], const char *secret, unsigned char out[32])
{
	crypto_generichash(out, 32, (const unsigned char *)secret, strlen(secret), hashkey, 32);
}

enum gh_code gh_keys_create(struct gh_store *s, const unsigned char hashkey[32],
			    struct gh_key *k, char secret_out[GH_KEY_SECRET_MAX],
			    struct gh_err *e)
{
	unsigned char hash[32];
	enum gh_code rc;

	gh_keys_generate(secret_out);
	gh_keys_hash(hashkey, secret_out, hash);
	gh_id_new("key_", k->id, sizeof(k->id));
	memcpy(k->prefix, secret_out, GH_KEY_PREFIX_LEN);
	k->prefix[GH_KEY_PREFIX_LEN] = '\0';
	k->created_at = gh_now_ms();
	rc = gh_store_key_insert(s, k, hash, e);
	if (rc != GH_OK)
		sodium_memzero(secret_out, GH_KEY_SECRET_MAX);
	return rc;
}

enum gh_code gh_keys_authenticate(struct gh_store *s, const unsigned char hashkey[32],
				  const char *authorization, struct gh_key *out,
				  struct gh_err *e)
{
	unsigned char hash[32];
	const char *secret;
	size_t n;
	enum gh_code rc;

	if (!authorization || !*authorization)
		return gh_err_set(e, GH_E_AUTH, "missing API key: send Authorization: Bearer <key>");
	if (strncasecmp(authorization, "Bearer ", 7) != 0)
		return gh_err_set(e, GH_E_AUTH, "malformed Authorization header: expected Bearer");
	secret = authorization + 7;
	while (*secret == ' ')
		secret++;
	n = strlen(secret);
	while (n > 0 && secret[n - 1] == ' ')
		n--;
	if (n == 0 || n >= GH_KEY_SECRET_MAX)
		return gh_err_set(e, GH_E_AUTH, "invalid API key");
	{
		char tmp[GH_KEY_SECRET_MAX];

		memcpy(tmp, secret, n);
		tmp[n] = '\0';
		gh_keys_hash(hashkey, tmp, hash);
		sodium_memzero(tmp, sizeof(tmp));
	}
	rc = gh_store_key_by_hash(s, hash, out, e);
	if (rc == GH_E_NOTFOUND)
		return gh_err_set(e, GH_E_AUTH, "invalid API key");
	if (rc != GH_OK)
		return rc;
	if (out->revoked_at)
		return gh_err_set(e, GH_E_AUTH, "API key %s... was revoked", out->prefix);
	return GH_OK;
}
