-- A memory search reads its own owner's and resource's words only.
-- memories_fts indexed the words of every memory together, so a search
-- read every memory holding one of its words, whoever it belonged to, and
-- took longer with every other user's memories (about 8 ms per search at
-- 50,000 memories of 1,000 users). It now indexes each word as
-- "<scope><stem>" (gatehouse's gh_memory_terms, src/store_fts.c), and a
-- search looks up its words with its own scope (gh_memory_match). The
-- table holds no copy of the text (content = ''): memories has it.
-- Both functions are gatehouse's: a memory can be saved or deleted only
-- through gatehouse, not from another SQLite program.

DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TABLE memories_fts;

CREATE VIRTUAL TABLE memories_fts USING fts5 (
  content, tags, content = '', tokenize = 'unicode61'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts (rowid, content, tags)
    VALUES (new.id, gh_memory_terms(new.owner, new.resource_id, new.content),
            gh_memory_terms(new.owner, new.resource_id, new.tags));
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
  INSERT INTO memories_fts (memories_fts, rowid, content, tags)
    VALUES ('delete', old.id, gh_memory_terms(old.owner, old.resource_id, old.content),
            gh_memory_terms(old.owner, old.resource_id, old.tags));
END;

INSERT INTO memories_fts (rowid, content, tags)
  SELECT id, gh_memory_terms(owner, resource_id, content),
         gh_memory_terms(owner, resource_id, tags)
  FROM memories;
