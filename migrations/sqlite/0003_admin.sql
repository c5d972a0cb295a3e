-- Admin UI accounts and their sessions.

CREATE TABLE admin_users (
  name           TEXT PRIMARY KEY,
  password_hash  TEXT NOT NULL,                -- Argon2id (libsodium crypto_pwhash_str)
  created_at     INTEGER NOT NULL,
  disabled_at    INTEGER,
  last_login_at  INTEGER
) STRICT;

CREATE TABLE admin_sessions (
  token_hash     BLOB PRIMARY KEY,             -- BLAKE2b of the 256-bit cookie token
  user           TEXT NOT NULL REFERENCES admin_users (name) ON DELETE CASCADE,
  csrf           TEXT NOT NULL,                -- sent back in X-CSRF-Token
  created_at     INTEGER NOT NULL,
  last_seen_at   INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL,             -- absolute expiry
  remote_addr    TEXT
) STRICT;
CREATE INDEX admin_sessions_by_user ON admin_sessions (user);
